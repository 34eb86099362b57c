"""Application factory: the whole middleware stack, built in code.

    /healthcheck (baremetal_service.health)  database + replay store reachability, unauthenticated
    request_id                        x-openstack-request-id on every response
                                      (baremetal_service.request_id; or oslo.middleware's)
      -> apimw microversion            baremetal 1.1 .. 1.117, legacy X-OpenStack-Ironic-API-Version
      -> auth (optional: http_basic)   verifies the caller, sets X-Project-Id
      -> noauth                        X-Project-Id -> environ["baremetal.project_id"]
      -> apimw idempotency             X-Client-Token replay of POSTs, per project
      -> apimw etag                    ETag / If-Match (412) from version 1.116
      -> Flask app                     baremetal_service.api

The order is the one of the top-level README's "Pipeline order" (the reasons are
there).  ``api-paste.ini`` builds the same pipeline through the ``egg:apimw#...``
entry points (:func:`load_paste_app`); tests prove both give the same answers.
``build_app`` also starts the conductor worker (the background thread that
carries out provision and power actions); ``app.close()`` stops it.
"""

from __future__ import annotations

import configparser
import threading
import uuid
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from baremetal_service import settings
from baremetal_service.api import create_flask_app, versions
from baremetal_service.api.noauth import NoAuthMiddleware
from baremetal_service.service import BaremetalService

if TYPE_CHECKING:
    from _typeshed.wsgi import StartResponse, WSGIApplication, WSGIEnvironment

PASTE_INI: Final = Path(__file__).with_name("api-paste.ini")
LEGACY_HEADER: Final = "X-OpenStack-Ironic-API-Version"

#: The microversion middleware's settings (also in api-paste.ini).
MICROVERSION_OPTIONS: Final[dict[str, Any]] = {
    "service_type": "baremetal",
    "min_version": str(versions.MIN_VERSION),
    "max_version": str(versions.MAX_VERSION),
    "legacy_header": LEGACY_HEADER,
    "error_profile": "ironic",
}

#: The etag middleware's settings: etags (and If-Match) exist from 1.116; the etag values
#: are computed and stored by the service (baremetal_service.db.etags) and compared
#: again atomically in the database write.
ETAG_OPTIONS: Final[dict[str, Any]] = {
    "min_version": str(versions.ETAG_VERSION),
    # The API sets the ETag header itself on single-resource answers; lists have none, so
    # the middleware must not parse every list body looking for one.
    "etag_from_body": False,
    # Every write the API takes If-Match on is conditional in the data layer, which marks it
    # enforced: If-Match is welcome on every write method (elsewhere apimw refuses it, 400).
    "enforces": "*",
}

#: The idempotency middleware's settings: tokens are scoped per project; requests without
#: X-Project-Id (noauth, single tenant) share one scope instead of being refused.
IDEMPOTENCY_OPTIONS: Final[dict[str, Any]] = {
    "scope": "project",
    "missing_scope": "shared",
}


class ServiceApp:
    """The WSGI callable plus the domain service (and its conductor workers) behind it."""

    def __init__(self, wsgi: WSGIApplication, service: BaremetalService, closers: Iterable[Any] = ()) -> None:
        self.wsgi = wsgi
        self.service = service
        self._closers = list(closers)
        self._closed = False
        self._lock = threading.Lock()

    def __call__(self, environ: WSGIEnvironment, start_response: StartResponse) -> Iterable[bytes]:
        return self.wsgi(environ, start_response)

    def close(self) -> None:
        """Stop the conductor workers, close the replay store and the database pool (once)."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
        for closer in self._closers:
            closer.close()
        self.service.close()


DEFAULT_HARDWARE_TYPES: tuple[str, ...] = settings.HARDWARE_TYPES
#: Seconds between power-state syncs (out-of-band changes made on the BMC); 0 disables it.
DEFAULT_POWER_SYNC_INTERVAL = settings.POWER_SYNC_INTERVAL


class _PowerSyncCloser:
    """Adapts a started PowerSync to the ``close()`` the ServiceApp closers expect."""

    def __init__(self, sync: Any) -> None:
        self.sync = sync

    def close(self) -> None:
        self.sync.stop()


def make_service(
    database_url: str,
    *,
    run_conductor: bool = settings.RUN_CONDUCTOR,
    enabled_hardware_types: Iterable[str] = DEFAULT_HARDWARE_TYPES,
    etag_key: str | bytes | None = None,
    fast_reads: bool = settings.FAST_READS,
    fast_writes: bool = settings.FAST_WRITES,
) -> BaremetalService:
    """The domain facade on *database_url*: schema migrated, conductor workers started.

    *etag_key* is the HMAC key of the etags; without one each process draws a random
    key (etags stay correct, but processes sharing a database should share a key).
    """
    return BaremetalService(
        database_url,
        etag_key=etag_key,
        conductor_workers=1 if run_conductor else 0,
        enabled_hardware_types=tuple(enabled_hardware_types),
        fast_reads=fast_reads,
        fast_writes=fast_writes,
    )


def start_power_sync(service: BaremetalService, interval: float) -> list[Any]:
    """Start the periodic power-state sync next to the conductor; its closer, or none if off."""
    if interval <= 0:
        return []
    from baremetal_service.conductor.power_sync import PowerSync

    sync = PowerSync(service.db, service.drivers, interval=interval)
    sync.start()
    return [_PowerSyncCloser(sync)]


def request_id_middleware(name: str) -> Any:
    """The request-id filter named *name*: ``builtin`` (ours, no webob) or ``oslo`` (oslo.middleware's)."""
    if name == "builtin":
        from baremetal_service.request_id import RequestIdMiddleware

        return RequestIdMiddleware
    if name == "oslo":
        from oslo_middleware.request_id import RequestId

        return RequestId
    raise ValueError(f"request_id must be 'builtin' or 'oslo', got {name!r}")


def wrap(flask_wsgi: WSGIApplication, *, store_url: str = settings.STORE,
         closers: list[Any] | None = None, auth: Any = None,
         request_id: str = settings.REQUEST_ID,
         lease: float = settings.IDEMPOTENCY_LEASE) -> WSGIApplication:
    """The middleware stack around the Flask app's WSGI callable (closables go to *closers*).

    The order: request_id -> microversion -> *auth* -> noauth -> idempotency -> etag -> app.
    *auth*: a filter ``app -> app`` put between microversion and noauth, which then reads the
    verified X-Project-Id (baremetal_service.auth's http_basic; see wsgi.py).
    *request_id*: ``builtin`` (:mod:`baremetal_service.request_id`) or ``oslo``.
    *lease*: seconds a client-token claim lives while the request runs (apimw's ``lease``).
    """
    request_id_filter = request_id_middleware(request_id)

    from apimw.etag import ETagMiddleware
    from apimw.idempotency import IdempotencyMiddleware
    from apimw.microversion import MicroversionMiddleware

    app: WSGIApplication = flask_wsgi
    app = ETagMiddleware(app, **ETAG_OPTIONS)
    idempotency = IdempotencyMiddleware(app, store=store_url, lease=lease, **IDEMPOTENCY_OPTIONS)
    if closers is not None:
        closers.append(idempotency)
    app = idempotency
    app = NoAuthMiddleware(app)
    if auth is not None:
        app = auth(app)
    app = MicroversionMiddleware(app, **MICROVERSION_OPTIONS)
    app = request_id_filter(app)
    return app


def with_healthcheck(app: WSGIApplication, service: BaremetalService, closers: list[Any]) -> WSGIApplication:
    """Answer ``/healthcheck`` (database and idempotency store) in front of *app*, outside auth."""
    from baremetal_service.health import BackendChecks, HealthRoute, make_health_app

    store = None
    for closer in closers:
        candidate = getattr(closer, "store", None)
        if candidate is not None and callable(getattr(candidate, "claim", None)):
            store = candidate
            break
    checks = BackendChecks(engine=service.db.engine, store=store)
    closers.append(checks)
    return HealthRoute(app, make_health_app(checks))


def build_app(
    database_url: str = settings.DATABASE,
    store_url: str = settings.STORE,
    *,
    run_conductor: bool = settings.RUN_CONDUCTOR,
    enabled_hardware_types: Iterable[str] = DEFAULT_HARDWARE_TYPES,
    power_sync_interval: float = DEFAULT_POWER_SYNC_INTERVAL,
    etag_key: str | bytes | None = None,
    healthcheck: bool = True,
    request_id: str = settings.REQUEST_ID,
    fast_validation: bool = settings.FAST_VALIDATION,
    fast_reads: bool = settings.FAST_READS,
    fast_writes: bool = settings.FAST_WRITES,
    lease: float = settings.IDEMPOTENCY_LEASE,
    public_endpoint: str | None = settings.PUBLIC_ENDPOINT,
) -> ServiceApp:
    """The whole service: domain facade, conductor worker, power sync, Flask app and middleware stack.

    *healthcheck*: serve ``/healthcheck`` in front of the stack (as wsgi.py does by default).
    *request_id*: the request-id middleware, ``builtin`` or ``oslo`` (see :func:`wrap`).
    *fast_validation*: request bodies accepted by the compiled checks (``False``: jsonschema
    decides every body; see api/fast_schema.py).  *fast_reads*, *fast_writes*: the driver-cursor
    statements (see :mod:`baremetal_service.settings`).  *lease*: the idempotency claim's
    lifetime (:func:`wrap`).  *public_endpoint*: the base URL of links and ``Location``
    headers (``None``: the request's Host header; see :func:`baremetal_service.api.create_flask_app`).
    """
    service = make_service(
        database_url,
        run_conductor=run_conductor,
        enabled_hardware_types=enabled_hardware_types,
        etag_key=etag_key,
        fast_reads=fast_reads,
        fast_writes=fast_writes,
    )
    try:
        closers: list[Any] = start_power_sync(service, power_sync_interval) if run_conductor else []
        flask_app = create_flask_app(
            service, fast_validation=fast_validation, public_endpoint=public_endpoint
        )
        wsgi = wrap(
            flask_app.wsgi_app, store_url=store_url, closers=closers, request_id=request_id, lease=lease
        )
        if healthcheck:
            wsgi = with_healthcheck(wsgi, service, closers)
    except BaseException:
        for closer in closers:
            closer.close()
        service.close()
        raise
    return ServiceApp(wsgi, service, closers)


# -- paste.deploy ----------------------------------------------------------------------------


def app_factory(global_conf: Mapping[str, Any], **local_conf: str) -> ServiceApp:
    """``[app:baremetal] paste.app_factory = baremetal_service.app:app_factory``: the bare Flask app.

    The etag key: the one :func:`load_paste_app` was given (``BAREMETAL_ETAG_KEY``,
    ``--etag-key-file``), else an ``etag_key`` ini value, else a random key per process.
    """
    database_url = local_conf.get("database", global_conf.get("database", settings.DATABASE))
    run = str(local_conf.get("run_conductor", global_conf.get("run_conductor", settings.RUN_CONDUCTOR)))
    run = run.lower()
    run_conductor = run in ("1", "true", "yes", "on")
    types = local_conf.get("enabled_hardware_types", global_conf.get("enabled_hardware_types"))
    interval = local_conf.get("power_sync_interval", global_conf.get("power_sync_interval"))
    endpoint = settings.public_endpoint(local_conf.get("public_endpoint", global_conf.get("public_endpoint")))
    instance = global_conf.get("instance")
    etag_key = _ETAG_KEYS.get(str(instance)) if instance else None
    if etag_key is None:
        etag_key = local_conf.get("etag_key", global_conf.get("etag_key")) or None
    service = make_service(
        database_url,
        run_conductor=run_conductor,
        enabled_hardware_types=[t.strip() for t in types.split(",") if t.strip()]
        if types
        else DEFAULT_HARDWARE_TYPES,
        etag_key=etag_key,
    )
    try:
        sync_interval = DEFAULT_POWER_SYNC_INTERVAL if interval is None else float(interval)
    except ValueError:
        service.close()
        raise ValueError(f"power_sync_interval must be a number of seconds, got {interval!r}") from None
    closers = start_power_sync(service, sync_interval) if run_conductor else []
    app = ServiceApp(create_flask_app(service, public_endpoint=endpoint).wsgi_app, service, closers)
    if instance:
        _CREATED[str(instance)] = app
    return app


#: ServiceApps built by app_factory, by the ``instance`` load_paste_app passed (so it can close them).
_CREATED: dict[str, ServiceApp] = {}
#: The etag key load_paste_app was given, by ``instance``: kept out of the paste config, whose
#: interpolation would choke on a ``%`` in the key and which paste hands to every filter.
_ETAG_KEYS: dict[str, str | bytes] = {}


class _PasteApp:
    """The pipeline loaded from api-paste.ini, remembering the inner ServiceApp to close it."""

    def __init__(self, pipeline: WSGIApplication, inner: ServiceApp, closers: Iterable[Any] = ()) -> None:
        self.pipeline = pipeline
        self.inner = inner
        self.service = inner.service
        self._closers = list(closers)

    def __call__(self, environ: WSGIEnvironment, start_response: StartResponse) -> Iterable[bytes]:
        return self.pipeline(environ, start_response)

    def close(self) -> None:
        for closer in self._closers:
            closer.close()
        self.inner.close()


def load_paste_app(
    ini_path: str | Path = PASTE_INI,
    *,
    database_url: str | None = None,
    store_url: str | None = None,
    run_conductor: bool = settings.RUN_CONDUCTOR,
    name: str = "main",
    etag_key: str | bytes | None = None,
    public_endpoint: str | None = None,
) -> _PasteApp:
    """Load the pipeline from *ini_path* with the given database, store and etag key (and the
    public endpoint, which overrides the ini's ``public_endpoint``).

    A *database_url* or *store_url* given here overrides the file's ``[DEFAULT]``; one not given
    leaves the file's own ``[DEFAULT] database`` / ``store`` in force, and the built-in default
    fills in only where the file names none.  (paste's global conf overrides ``[DEFAULT]``: a
    default passed whatever the file said would silently replace the store the file names.)
    """
    from paste.deploy import loadapp

    instance = uuid.uuid4().hex
    named = _paste_defaults(ini_path)
    global_conf = {"instance": instance, "run_conductor": "true" if run_conductor else "false"}
    for key, given, fallback in (("database", database_url, settings.DATABASE),
                                 ("store", store_url, settings.STORE)):  # fmt: skip
        if given is not None:
            global_conf[key] = given
        elif key not in named:
            global_conf[key] = fallback
    if public_endpoint:
        global_conf["public_endpoint"] = public_endpoint
    if etag_key is not None:
        _ETAG_KEYS[instance] = etag_key
    try:
        pipeline = loadapp(f"config:{Path(ini_path).resolve()}", name=name, global_conf=global_conf)
    finally:
        _ETAG_KEYS.pop(instance, None)
    inner = _CREATED.pop(instance, None)
    if inner is None:
        raise RuntimeError(f"{ini_path}: the pipeline does not end in baremetal_service.app:app_factory")
    return _PasteApp(pipeline, inner, _closables(pipeline))


def _paste_defaults(ini_path: str | Path) -> frozenset[str]:
    """The keys the paste file's own ``[DEFAULT]`` section names."""
    parser = configparser.ConfigParser(interpolation=None, strict=False)
    parser.read(ini_path)
    return frozenset(parser.defaults())


def _closables(app: Any) -> list[Any]:
    """Middlewares in the pipeline that hold resources (the idempotency store)."""
    found = []
    for _ in range(20):
        if app is None or isinstance(app, ServiceApp):
            break
        if callable(getattr(app, "close", None)):
            found.append(app)
        app = getattr(app, "app", None) or getattr(app, "_app", None) or getattr(app, "application", None)
    return found
