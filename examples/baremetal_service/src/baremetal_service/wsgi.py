"""The service as a WSGI ``application`` for gunicorn (or any WSGI server), configured by environment.

    gunicorn -c python:baremetal_service.gunicorn_conf baremetal_service.wsgi:application

Each worker process builds its own stack on first access of ``application``
(PEP 562 module ``__getattr__``: importing this module has no side effect):
database pool, conductor worker threads, replay store connections.  Processes
share nothing but the database and the replay store, which is what keeps the
guarantees across processes: the client-token claim is atomic in Redis or
memcached, the If-Match check is atomic in the database ``UPDATE``, and a node's
queued action is claimed by exactly one conductor with a database lease.

=================================  ==============================  ===========================================
environment variable               default                         meaning
=================================  ==============================  ===========================================
``BAREMETAL_DATABASE``             ``sqlite:///baremetal.sqlite``  SQLAlchemy URL (``postgresql+psycopg://...``)
``BAREMETAL_STORE``                ``memory://``                   idempotency store: ``redis://``, ``memcached://``
``BAREMETAL_IDEMPOTENCY_LEASE``    ``300``                         seconds a client-token claim lives while
                                                                   its request runs (a crashed worker's token
                                                                   answers 409 until then); keep it above the
                                                                   worker timeout (paste: the ini's lease)
``BAREMETAL_AUTH_STRATEGY``        ``noauth``                      ``noauth`` (trusts ``X-Project-Id``),
                                                                   ``http_basic`` (htpasswd + bcrypt)
``BAREMETAL_HTPASSWD``             ``/etc/baremetal/htpasswd``     the ``http_basic`` user file
``BAREMETAL_AUTH_PROJECT``         (none)                          ``http_basic``: project of every user
``BAREMETAL_PASTE_INI``            (none)                          build the pipeline from this api-paste.ini
                                                                   instead (keystonemiddleware auth_token);
                                                                   ``BAREMETAL_ETAG_KEY`` still applies
``BAREMETAL_ETAG_KEY``             (random per process)            etag HMAC key; give every process the same
                                                                   (set but empty: refused)
``BAREMETAL_PUBLIC_ENDPOINT``      (the request's Host)            base URL of links and ``Location`` headers
                                                                   (Ironic's ``public_endpoint``), such as
                                                                   ``https://baremetal.example.com:6385``
``BAREMETAL_CONDUCTOR_WORKERS``    ``1``                           conductor threads per process (0: API only)
``BAREMETAL_HEALTHCHECK``          ``true``                        serve ``/healthcheck`` (unauthenticated)
``BAREMETAL_FAST_READS``           ``true``                        one-row reads on the driver's cursor
                                                                   (false: SQLAlchemy Core; driver_select.py)
``BAREMETAL_FAST_WRITES``          ``true``                        write statements compiled once, run on the
                                                                   driver's cursor in the same transaction
                                                                   (false: SQLAlchemy Core; driver_write.py)
``BAREMETAL_FAST_VALIDATION``      ``true``                        request bodies checked by compiled schema
                                                                   validators (false: jsonschema decides;
                                                                   api/fast_schema.py)
``BAREMETAL_REQUEST_ID``           ``builtin``                     request-id middleware: ``builtin`` (ours,
                                                                   no webob) or ``oslo`` (oslo.middleware's)
``BAREMETAL_WORKER_PROCESSES``     ``1``                           how many processes serve (gunicorn_conf.py
                                                                   sets it); ``memory://`` refuses more than 1
``BAREMETAL_DEBUG_WORKER_HEADER``  ``false``                       add ``X-Baremetal-Worker-Pid`` to responses
                                                                   (tests and load checks, never production)
``BAREMETAL_GC``                   ``tuned``                       garbage collector once the application is
                                                                   built: ``tuned`` (freeze, fewer young
                                                                   passes; gc_tuning.py) or ``default``
=================================  ==============================  ===========================================

A bad value is a :class:`apimw.errors.ConfigError` with one clear sentence,
raised when the worker loads the application (gunicorn then stops).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any, Final
from urllib.parse import urlsplit

from apimw.errors import ConfigError
from apimw.idempotency import IdempotencyMiddleware

from . import gc_tuning
from . import settings as defaults

if TYPE_CHECKING:
    from _typeshed.wsgi import StartResponse, WSGIApplication, WSGIEnvironment

__all__ = [
    "MEMORY_STORE_MESSAGE",
    "WsgiApp",
    "check_built_store",
    "check_store_processes",
    "make_application",
    "replay_store",
    "settings",
]

DEFAULT_DATABASE: Final = defaults.DATABASE
DEFAULT_STORE: Final = defaults.STORE
DEFAULT_HTPASSWD: Final = defaults.HTPASSWD
AUTH_STRATEGIES: Final = ("noauth", "http_basic")
REQUEST_ID_FILTERS: Final = ("builtin", "oslo")
WORKER_PID_HEADER: Final = "X-Baremetal-Worker-Pid"

MEMORY_STORE_MESSAGE: Final = (
    "the memory:// idempotency store cannot be used with {processes} worker processes: each process "
    "would keep its own records, so a retried X-Client-Token request reaching another process would "
    "run again (a second node). Set BAREMETAL_STORE to a shared store (redis://host:6379/0 or "
    "memcached://host:11211), or run a single worker process."
)

_TRUE: Final = frozenset({"1", "true", "yes", "on"})
_FALSE: Final = frozenset({"0", "false", "no", "off", ""})


def _flag(env: Mapping[str, str], name: str, default: bool) -> bool:
    value = env.get(name)
    if value is None:
        return default
    lowered = value.strip().lower()
    if lowered in _TRUE:
        return True
    if lowered in _FALSE:
        return False
    raise ConfigError(f"{name} must be true or false, got {value!r}")


def _count(env: Mapping[str, str], name: str, default: int, minimum: int) -> int:
    value = env.get(name)
    if value is None or not value.strip():
        return default
    try:
        number = int(value)
    except ValueError:
        raise ConfigError(f"{name} must be an integer, got {value!r}") from None
    if number < minimum:
        raise ConfigError(f"{name} must be at least {minimum}, got {number}")
    return number


def _seconds(env: Mapping[str, str], name: str, default: float) -> float:
    value = env.get(name)
    if value is None or not value.strip():
        return default
    try:
        number = float(value)
    except ValueError:
        raise ConfigError(f"{name} must be a number of seconds, got {value!r}") from None
    if not number > 0 or number == float("inf"):
        raise ConfigError(f"{name} must be a positive number of seconds, got {value!r}")
    return number


def _etag_key(env: Mapping[str, str]) -> str | None:
    value = env.get("BAREMETAL_ETAG_KEY")
    if value is not None and not value.strip():
        # BAREMETAL_ETAG_KEY=$(cat missing-file): a random key per process would follow, silently
        raise ConfigError("BAREMETAL_ETAG_KEY is set but empty: give it a key, or unset it for a random one")
    return value


def _public_endpoint(env: Mapping[str, str]) -> str | None:
    try:
        return defaults.public_endpoint(env.get("BAREMETAL_PUBLIC_ENDPOINT"))
    except ConfigError as exc:
        raise ConfigError(f"BAREMETAL_PUBLIC_ENDPOINT: {exc}") from None


def check_store_processes(store_url: str, processes: int) -> None:
    """Refuse ``memory://`` when more than one process serves (the one-line reason is the message).

    Before anything is built this can only judge the configured URL; once the stack is
    built, :func:`check_built_store` judges the store it actually holds.
    """
    if processes > 1 and urlsplit(store_url).scheme.lower() == "memory":
        raise ConfigError(MEMORY_STORE_MESSAGE.format(processes=processes))


#: attributes through which one layer of a built stack reaches the next (ours, apimw's, paste's)
_INNER: Final = ("wsgi", "pipeline", "app", "_app", "application", "inner", "_closers")


def replay_store(app: Any) -> Any:
    """The replay store of the :class:`apimw.idempotency.IdempotencyMiddleware` in a built stack.

    Walks the layers of *app* (at most 200 objects); ``None`` when the stack has none.
    """
    todo: list[Any] = [app]
    seen: set[int] = set()
    while todo and len(seen) < 200:
        obj = todo.pop(0)
        if obj is None or id(obj) in seen or isinstance(obj, (str, bytes, int, float, dict, type)):
            continue
        seen.add(id(obj))
        if isinstance(obj, IdempotencyMiddleware):
            return obj.store
        if isinstance(obj, (list, tuple)):
            todo.extend(obj)
            continue
        todo.extend(getattr(obj, name, None) for name in _INNER)
    return None


def check_built_store(app: Any, processes: int) -> None:
    """Refuse a built stack whose replay store is ``memory://`` when several processes serve.

    Whatever the environment said: a paste file decides the store of its own pipeline.
    """
    store = replay_store(app)
    if store is not None:
        check_store_processes(store.name, processes)


def settings(env: Mapping[str, str] | None = None, *, check_processes: bool = True) -> dict[str, Any]:
    """The validated configuration read from *env* (default ``os.environ``).

    *check_processes*: refuse ``memory://`` with more than one process
    (:func:`check_store_processes`; the CLI checks its own ``--store`` and ``--workers``).
    """
    env = os.environ if env is None else env
    strategy = env.get("BAREMETAL_AUTH_STRATEGY", "").strip().lower() or defaults.AUTH_STRATEGY
    if strategy not in AUTH_STRATEGIES:
        raise ConfigError(
            f"BAREMETAL_AUTH_STRATEGY must be one of {', '.join(AUTH_STRATEGIES)}, got {strategy!r} "
            "(keystone: use BAREMETAL_PASTE_INI with an auth_token pipeline)"
        )
    conf: dict[str, Any] = {
        "database": env.get("BAREMETAL_DATABASE") or DEFAULT_DATABASE,
        "store": env.get("BAREMETAL_STORE") or DEFAULT_STORE,
        "idempotency_lease": _seconds(env, "BAREMETAL_IDEMPOTENCY_LEASE", defaults.IDEMPOTENCY_LEASE),
        "auth_strategy": strategy,
        "htpasswd": env.get("BAREMETAL_HTPASSWD") or DEFAULT_HTPASSWD,
        "auth_project": env.get("BAREMETAL_AUTH_PROJECT") or None,
        "paste_ini": env.get("BAREMETAL_PASTE_INI") or None,
        "etag_key": _etag_key(env),
        "public_endpoint": _public_endpoint(env),
        "conductor_workers": _count(env, "BAREMETAL_CONDUCTOR_WORKERS", 1, 0),
        "healthcheck": _flag(env, "BAREMETAL_HEALTHCHECK", True),
        "fast_reads": _flag(env, "BAREMETAL_FAST_READS", defaults.FAST_READS),
        "fast_writes": _flag(env, "BAREMETAL_FAST_WRITES", defaults.FAST_WRITES),
        "fast_validation": _flag(env, "BAREMETAL_FAST_VALIDATION", defaults.FAST_VALIDATION),
        "processes": max(
            _count(env, "BAREMETAL_WORKER_PROCESSES", 1, 1), _count(env, "WEB_CONCURRENCY", 1, 1)
        ),
        "debug_worker_header": _flag(env, "BAREMETAL_DEBUG_WORKER_HEADER", False),
        "request_id": env.get("BAREMETAL_REQUEST_ID", "").strip().lower() or defaults.REQUEST_ID,
        "gc": env.get("BAREMETAL_GC", "").strip().lower() or gc_tuning.DEFAULT_MODE,
    }
    if conf["gc"] not in gc_tuning.MODES:
        raise ConfigError(f"BAREMETAL_GC must be one of {', '.join(gc_tuning.MODES)}, got {conf['gc']!r}")
    if conf["request_id"] not in REQUEST_ID_FILTERS:
        raise ConfigError(
            f"BAREMETAL_REQUEST_ID must be one of {', '.join(REQUEST_ID_FILTERS)}, got {conf['request_id']!r}"
        )
    if check_processes and not conf["paste_ini"]:  # a paste file's own store is judged once built
        check_store_processes(conf["store"], conf["processes"])
    return conf


class _WorkerPid:
    """Adds ``X-Baremetal-Worker-Pid`` (debug only: which process answered)."""

    def __init__(self, app: WSGIApplication) -> None:
        self.app = app

    def __call__(self, environ: WSGIEnvironment, start_response: StartResponse) -> Iterable[bytes]:
        header = (WORKER_PID_HEADER, str(os.getpid()))  # read per call: correct after a fork

        def _start(status: str, headers: list[tuple[str, str]], exc_info: Any = None) -> Any:
            return start_response(status, [*headers, header], exc_info)

        return self.app(environ, _start)


class WsgiApp:
    """The WSGI callable gunicorn serves, plus ``close()`` (conductor, store, pool) for worker exit."""

    def __init__(self, wsgi: WSGIApplication, closers: Iterable[Any]) -> None:
        self.wsgi = wsgi
        self._closers = list(closers)
        self._lock = threading.Lock()
        self._closed = False

    def __call__(self, environ: WSGIEnvironment, start_response: StartResponse) -> Iterable[bytes]:
        return self.wsgi(environ, start_response)

    def close(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
        for closer in reversed(self._closers):
            closer.close()


def _auth_filter(conf: Mapping[str, Any]) -> Any:
    if conf["auth_strategy"] != "http_basic":
        return None
    from .auth import BasicAuthMiddleware

    kwargs: dict[str, Any] = {"user_file": conf["htpasswd"], "project_id": conf["auth_project"]}
    BasicAuthMiddleware(lambda e, s: [], **kwargs)  # validate the file now, before building the service

    def _wrap(app: WSGIApplication) -> WSGIApplication:
        return BasicAuthMiddleware(app, **kwargs)

    return _wrap


def make_application(env: Mapping[str, str] | None = None) -> WsgiApp:
    """Build the whole service for this process from *env* (default ``os.environ``)."""
    conf = settings(env)
    closers: list[Any] = []
    if conf["paste_ini"]:
        from .app import load_paste_app

        named = os.environ if env is None else env
        pasted = load_paste_app(  # the file's [DEFAULT] decides what the environment does not name
            conf["paste_ini"],
            database_url=named.get("BAREMETAL_DATABASE") or None,
            store_url=named.get("BAREMETAL_STORE") or None,
            run_conductor=conf["conductor_workers"] > 0,
            etag_key=conf["etag_key"],
            public_endpoint=conf["public_endpoint"],
        )
        closers.append(pasted)
        wsgi: WSGIApplication = pasted
        service = pasted.service
        store = replay_store(pasted)
    else:
        from .api import create_flask_app
        from .app import wrap
        from .service import BaremetalService

        auth = _auth_filter(conf)
        service = BaremetalService(
            conf["database"],
            etag_key=conf["etag_key"],
            conductor_workers=conf["conductor_workers"],
            fast_reads=conf["fast_reads"],
            fast_writes=conf["fast_writes"],
        )
        closers.append(service)
        try:
            inner: list[Any] = []
            flask_app = create_flask_app(
                service, fast_validation=conf["fast_validation"], public_endpoint=conf["public_endpoint"]
            )
            wsgi = wrap(flask_app.wsgi_app, store_url=conf["store"], closers=inner, auth=auth,
                        request_id=conf["request_id"], lease=conf["idempotency_lease"])
            closers.extend(inner)
        except BaseException:
            service.close()
            raise
        store = replay_store(wsgi)
    from .health import HealthRoute

    if conf["healthcheck"] and not isinstance(getattr(wsgi, "pipeline", None), HealthRoute):
        # (a paste pipeline that starts with the healthcheck filter already serves it)
        from .health import BackendChecks, make_health_app

        checks = BackendChecks(engine=service.db.engine, store=store)
        closers.append(checks)
        wsgi = HealthRoute(wsgi, make_health_app(checks))
    if conf["debug_worker_header"]:
        wsgi = _WorkerPid(wsgi)
    built = WsgiApp(wsgi, closers)
    try:
        check_built_store(built, conf["processes"])
    except ConfigError:
        built.close()
        raise
    return built


_APP: dict[str, WsgiApp] = {}
_APP_LOCK = threading.Lock()


def __getattr__(name: str) -> Any:
    """``application``: built on first access, once per process."""
    if name != "application":
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    with _APP_LOCK:
        if "app" not in _APP:
            _APP["app"] = make_application()
            gc_tuning.apply(settings()["gc"])
        return _APP["app"]


def close_application() -> None:
    """Close this process's application if it was built (gunicorn's worker_exit hook calls it)."""
    with _APP_LOCK:
        app = _APP.pop("app", None)
    if app is not None:
        app.close()
