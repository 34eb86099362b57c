"""``/healthcheck``: oslo.middleware's healthcheck app with a database + replay-store backend.

The ``baremetal`` backend (entry point ``oslo.middleware.healthcheck:baremetal``)
checks, in parallel and each within ``timeout`` seconds:

* the **database**: ``SELECT 1`` on the service's connection pool;
* the **idempotency store**: a read of one probe key (Redis, memcached; the
  in-process ``memory://`` store is always reachable).

All reachable -> ``200`` (``HEAD``: ``204``); anything down -> ``503``.  The
reasons name each part and its state (``database: OK``, ``idempotency store:
UNAVAILABLE``) and never a URL, host name or credential; ``detailed`` mode adds
the exception class.  The endpoint is unauthenticated: :class:`HealthRoute`
answers it in front of the auth middleware (load balancers probe it), as Ironic
serves ``/healthcheck``.

In code::

    health = make_health_app(BackendChecks(engine=service.db.engine, store=store))
    app = HealthRoute(app, health)                       # outermost

With paste.deploy, first in the pipeline (it opens its own one-connection pool
and store from the ``database`` and ``store`` values of ``[DEFAULT]``)::

    [pipeline:main]
    pipeline = healthcheck request_id microversion http_basic noauth idempotency etag baremetal

    [filter:healthcheck]
    paste.filter_factory = baremetal_service.health:filter_factory
    # path = /healthcheck   detailed = false   timeout = 2
"""

from __future__ import annotations

import concurrent.futures
import logging
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any, Final

import sqlalchemy as sa
from oslo_middleware.healthcheck import Healthcheck
from oslo_middleware.healthcheck.pluginbase import HealthcheckBaseExtension, HealthcheckResult

from apimw.config import as_bool, as_float
from apimw.errors import ConfigError
from apimw.idempotency import open_store
from baremetal_service.db.engine import create_engine

if TYPE_CHECKING:
    from _typeshed.wsgi import StartResponse, WSGIApplication, WSGIEnvironment
    from sqlalchemy.engine import Engine

    from apimw.idempotency import Store

__all__ = ["BackendChecks", "BaremetalHealthcheck", "HealthRoute", "filter_factory", "make_health_app"]

LOG = logging.getLogger(__name__)

HEALTH_PATH: Final = "/healthcheck"
#: conf key through which code hands the checks object to the plugin.
CONF_CHECKS: Final = "baremetal_checks"
#: the key the store check reads (never written)
PROBE_KEY: Final = "apimw:healthcheck:probe"
OK: Final = "OK"
DOWN: Final = "UNAVAILABLE"


class BackendChecks:
    """Reachability of the database and the replay store, each bounded by *timeout* seconds."""

    def __init__(
        self,
        *,
        engine: Engine | None,
        store: Store | None,
        timeout: float = 2.0,
        owns: Iterable[Any] = (),
    ) -> None:
        self.engine = engine
        self.store = store
        self.timeout = timeout
        self._owns = list(owns)
        self._pool = concurrent.futures.ThreadPoolExecutor(max_workers=4, thread_name_prefix="healthcheck")

    def _database(self) -> None:
        assert self.engine is not None  # noqa: S101 - only submitted when set
        with self.engine.connect() as conn:
            conn.execute(sa.text("SELECT 1"))

    def _store(self) -> None:
        assert self.store is not None  # noqa: S101 - only submitted when set
        self.store.get(PROBE_KEY)  # returns while the store answers, raises when it cannot

    def run(self) -> list[tuple[str, bool, str]]:
        """``[(part, reachable, error class or "")]`` for the database and the store."""
        parts: list[tuple[str, Any]] = []
        if self.engine is not None:
            parts.append(("database", self._database))
        if self.store is not None:
            parts.append(("idempotency store", self._store))
        futures = [(name, self._pool.submit(fn)) for name, fn in parts]
        results = []
        for name, future in futures:
            try:
                future.result(timeout=self.timeout)
            except concurrent.futures.TimeoutError:
                results.append((name, False, "timed out"))
            except Exception as exc:  # any failure of a check is "unavailable", never a 500
                LOG.warning("healthcheck: %s unreachable: %s", name, type(exc).__name__)
                results.append((name, False, type(exc).__name__))
            else:
                results.append((name, True, ""))
        return results

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)
        for resource in self._owns:
            close = getattr(resource, "close", None) or getattr(resource, "dispose", None)
            if close is not None:
                close()


class BaremetalHealthcheck(HealthcheckBaseExtension):
    """The oslo.middleware healthcheck backend (``backends = baremetal``)."""

    def __init__(self, oslo_conf: Any, conf: dict[str, Any]) -> None:
        super().__init__(oslo_conf, conf)
        checks = conf.get(CONF_CHECKS)
        if checks is None:
            checks = _checks_from_urls(conf)
        self.checks: BackendChecks = checks

    def healthcheck(self, server_port: int) -> HealthcheckResult:
        results = self.checks.run()
        available = all(ok for _, ok, _ in results)
        reason = "; ".join(f"{name}: {OK if ok else DOWN}" for name, ok, _ in results) or OK
        details = "; ".join(f"{name}: {why}" for name, ok, why in results if not ok) or None
        return HealthcheckResult(available=available, reason=reason, details=details)


def _checks_from_urls(conf: Mapping[str, Any]) -> BackendChecks:
    """paste.deploy: a one-connection pool and a store of the service's URLs."""
    engine = create_engine(conf["database"], pool_size=1) if conf.get("database") else None
    store = open_store(conf["store"]) if conf.get("store") else None
    return BackendChecks(engine=engine, store=store, owns=[x for x in (engine, store) if x is not None])


def make_health_app(checks: BackendChecks, *, detailed: bool = False) -> WSGIApplication:
    """oslo.middleware's Healthcheck app running the ``baremetal`` backend on *checks*."""
    app: WSGIApplication = Healthcheck(
        None, {"backends": ["baremetal"], "detailed": detailed, CONF_CHECKS: checks}
    )
    return app


class HealthRoute:
    """Answer ``GET/HEAD /healthcheck`` with *health*; everything else goes to *app*.

    ``close()`` closes *owns* (the checks a paste filter built for itself).
    """

    def __init__(
        self, app: WSGIApplication, health: WSGIApplication, *, path: str = HEALTH_PATH, owns: Any = None
    ) -> None:
        self.app = app
        self.health = health
        self.path = path
        self._owns = owns

    def __call__(self, environ: WSGIEnvironment, start_response: StartResponse) -> Iterable[bytes]:
        if environ.get("PATH_INFO") == self.path:
            return self.health(environ, start_response)
        return self.app(environ, start_response)

    def close(self) -> None:
        owns, self._owns = self._owns, None
        if owns is not None:
            owns.close()


def filter_factory(global_conf: Mapping[str, Any], **local_conf: str) -> Any:
    """paste.deploy: ``paste.filter_factory = baremetal_service.health:filter_factory``.

    Keys (local or ``[DEFAULT]``): ``database`` and ``store`` (the service's URLs),
    ``path`` (``/healthcheck``), ``detailed`` (false), ``timeout`` (2 seconds).
    """
    conf = {**global_conf, **local_conf}
    path = str(conf.get("path") or HEALTH_PATH)
    if not path.startswith("/"):
        raise ConfigError(f"healthcheck: path must start with '/', got {path!r}")
    detailed = as_bool(str(conf.get("detailed", "false")))
    timeout = as_float(str(conf.get("timeout", "2")))

    def _filter(app: WSGIApplication) -> WSGIApplication:
        checks = _checks_from_urls(conf)
        checks.timeout = timeout
        return HealthRoute(app, make_health_app(checks, detailed=detailed), path=path, owns=checks)

    return _filter
