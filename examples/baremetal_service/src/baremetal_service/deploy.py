"""The deployment: the whole apimw pipeline around the service, in code (and in ``api-paste.ini``).

    /healthcheck (baremetal_service.health)  database + replay store reachability, unauthenticated
    request_id (oslo.middleware)      x-openstack-request-id on every response
      -> apimw microversion            baremetal 1.1 .. 1.117, legacy X-OpenStack-Ironic-API-Version
      -> auth (optional)               verifies the caller, sets X-Project-Id: http_basic, or
                                       keystone (auth_token; /, /v1 open; Ironic's access rules)
      -> noauth                        X-Project-Id -> environ["baremetal.project_id"]
      -> apimw idempotency             X-Client-Token replay of POSTs, per project
      -> apimw etag                    ETag / If-Match (412) from version 1.116
      -> Flask app                     baremetal_service.handlers.routes

The order is the one of the top-level README's "Pipeline order" (the reasons are
there).  ``api-paste.ini`` builds the same pipeline through the ``egg:apimw#...``
entry points (:func:`load_paste_app`); tests prove both give the same answers.

Three ways in, one result (a :class:`ServiceApp`: the WSGI callable, the domain service
behind it and ``close()``):

* :func:`build_app` -- keyword arguments, for code and tests;
* :func:`build` -- a settings dict (:func:`baremetal_service.settings.from_environ`, with
  the CLI's options laid over it): in code, or from a paste file when it names one;
* ``application`` -- the WSGI entry point gunicorn (or any WSGI server) serves::

      gunicorn -c python:baremetal_service.servers.gunicorn_conf baremetal_service.deploy:application

  Each worker process builds its own stack from ``BAREMETAL_*`` (the table in
  :mod:`baremetal_service.settings`) on first access of ``application`` (PEP 562 module
  ``__getattr__``: importing this module has no side effect): database pool, conductor
  worker threads, replay store connections.  Processes share nothing but the database
  and the replay store, which is what keeps the guarantees across processes: the
  client-token claim is atomic in Redis or memcached, the If-Match check is atomic in
  the database ``UPDATE``, and a node's queued action is claimed by exactly one
  conductor with a database lease.  A bad value is a :class:`apimw.errors.ConfigError`
  with one clear sentence, raised when the worker loads the application.

The service also starts the conductor worker (the background threads that carry out
provision and power actions) and the power-state sync; ``close()`` stops them.
"""

from __future__ import annotations

import configparser
import ctypes
import gc
import os
import platform
import threading
import uuid
from collections import deque
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from oslo_middleware.request_id import RequestId
from paste.deploy import loadapp

from apimw.errors import ConfigError
from apimw.etag import ETagMiddleware
from apimw.idempotency import IdempotencyMiddleware
from apimw.microversion import MicroversionMiddleware
from baremetal_service import keystone, openapi, settings, versions
from baremetal_service.auth import BasicAuthMiddleware
from baremetal_service.conductor.power_sync import PowerSync
from baremetal_service.handlers.noauth import NoAuthMiddleware, tenant_scope
from baremetal_service.handlers.routes import create_flask_app
from baremetal_service.health import BackendChecks, HealthRoute, make_health_app
from baremetal_service.objects.service import BaremetalService

if TYPE_CHECKING:
    from _typeshed.wsgi import StartResponse, WSGIApplication, WSGIEnvironment
    from flask import Flask

__all__ = [
    "ETAG_OPTIONS",
    "IDEMPOTENCY_OPTIONS",
    "MICROVERSION_OPTIONS",
    "PASTE_INI",
    "ServiceApp",
    "app_factory",
    "build",
    "build_app",
    "create_app",
    "check_built_store",
    "close_application",
    "load_paste_app",
    "make_application",
    "make_service",
    "replay_store",
    "tune_gc",
    "tune_malloc",
    "wrap",
]

PASTE_INI: Final = Path(__file__).with_name("api-paste.ini")
LEGACY_HEADER: Final = versions.LEGACY_HEADER
WORKER_PID_HEADER: Final = "X-Baremetal-Worker-Pid"

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
    # Ironic's wire: unquoted W/<hex> in If-Match, an ETag after a PUT, no 304, If-None-Match
    # on a write refused (400)
    "compat": "ironic",
    # The API sets the ETag header itself on single-resource answers; lists have none, so
    # the middleware must not parse every list body looking for one.
    "etag_from_body": False,
    # Every write the API takes If-Match on is conditional in the data layer, which marks it
    # enforced: If-Match is welcome on every write method (elsewhere apimw refuses it, 400).
    "enforces": "*",
}

#: The idempotency middleware's settings: tokens are scoped per project, a system-scoped
#: token's in a scope of its own (:func:`~baremetal_service.handlers.noauth.tenant_scope`);
#: requests with neither (noauth, single tenant) share one scope instead of being refused.
IDEMPOTENCY_OPTIONS: Final[dict[str, Any]] = {
    "scope": tenant_scope,
    "missing_scope": "shared",
}


class ServiceApp:
    """The WSGI callable, the domain service behind it, and ``close()``.

    ``close()`` (once, from any thread) closes *closers* last first -- the health checks,
    the replay store, the power sync -- then the service: its conductor workers and
    database pool.
    """

    def __init__(self, wsgi: WSGIApplication, service: BaremetalService, closers: Iterable[Any] = ()) -> None:
        self.wsgi = wsgi
        self.service = service
        self._closers = list(closers)
        self._closed = False
        self._lock = threading.Lock()

    def __call__(self, environ: WSGIEnvironment, start_response: StartResponse) -> Iterable[bytes]:
        return self.wsgi(environ, start_response)

    def close(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
        for closer in reversed(self._closers):
            closer.close()
        self.service.close()


class _PowerSyncCloser:
    """Adapts a started PowerSync to the ``close()`` the ServiceApp closers expect."""

    def __init__(self, sync: PowerSync) -> None:
        self.sync = sync

    def close(self) -> None:
        self.sync.stop()


def make_service(
    database_url: str,
    *,
    conductor_workers: int = 1,
    enabled_hardware_types: Iterable[str] = settings.HARDWARE_TYPES,
    etag_key: str | bytes | None = None,
) -> BaremetalService:
    """The domain facade on *database_url*: schema migrated, conductor workers started.

    *etag_key* is the HMAC key of the etags; without one each process draws a random
    key (etags stay correct, but processes sharing a database should share a key).
    """
    return BaremetalService(
        database_url,
        etag_key=etag_key,
        conductor_workers=conductor_workers,
        enabled_hardware_types=tuple(enabled_hardware_types),
    )


def start_power_sync(service: BaremetalService, interval: float) -> list[Any]:
    """Start the periodic power-state sync next to the conductor; its closer, or none if off."""
    if interval <= 0:
        return []
    sync = PowerSync(service.db, service.drivers, interval=interval)
    sync.start()
    return [_PowerSyncCloser(sync)]


def create_app(service: Any, **options: Any) -> Flask:
    """The Flask app of the API (:func:`~baremetal_service.handlers.routes.create_flask_app`, the
    same *options*) with its OpenAPI document at ``GET /v1/openapi.json``: the deployment
    registers it, as the document is built from the handlers (which do not import it)."""
    return openapi.install(create_flask_app(service, **options))


def wrap(flask_wsgi: WSGIApplication, *, store_url: str = settings.STORE,
         closers: list[Any] | None = None, auth: Any = None,
         lease: float = settings.IDEMPOTENCY_LEASE,
         missing_scope: str = "shared") -> WSGIApplication:  # fmt: skip
    """The middleware stack around the Flask app's WSGI callable (closables go to *closers*).

    The order: request_id -> microversion -> *auth* -> noauth -> idempotency -> etag -> app.
    *auth*: a filter ``app -> app`` put between microversion and noauth, which then reads the
    verified X-Project-Id (:func:`auth_filter`).  *lease*: seconds a client-token claim lives
    while the request runs (apimw's ``lease``).  *missing_scope*: what a client token gets on a
    request without a tenant (``shared``: one scope, for noauth; ``reject``: 400, behind Keystone).
    """
    app: WSGIApplication = flask_wsgi
    app = ETagMiddleware(app, **ETAG_OPTIONS)
    options = {**IDEMPOTENCY_OPTIONS, "missing_scope": missing_scope}
    idempotency = IdempotencyMiddleware(app, store=store_url, lease=lease, **options)
    if closers is not None:
        closers.append(idempotency)
    app = idempotency
    app = NoAuthMiddleware(app)
    if auth is not None:
        app = auth(app)
    app = MicroversionMiddleware(app, **MICROVERSION_OPTIONS)
    app = RequestId(app)
    return app


def with_healthcheck(app: WSGIApplication, service: BaremetalService, closers: list[Any]) -> WSGIApplication:
    """Answer ``/healthcheck`` (database and idempotency store) in front of *app*, outside auth."""
    checks = BackendChecks(engine=service.db.engine, store=replay_store(app))
    closers.append(checks)
    return HealthRoute(app, make_health_app(checks))


def build_app(
    database_url: str = settings.DATABASE,
    store_url: str = settings.STORE,
    *,
    run_conductor: bool = settings.RUN_CONDUCTOR,
    conductor_workers: int = 1,
    enabled_hardware_types: Iterable[str] = settings.HARDWARE_TYPES,
    power_sync_interval: float = settings.POWER_SYNC_INTERVAL,
    etag_key: str | bytes | None = None,
    healthcheck: bool = True,
    auth: Any = None,
    lease: float = settings.IDEMPOTENCY_LEASE,
    public_endpoint: str | None = settings.PUBLIC_ENDPOINT,
    authorizer: Any = None,
    missing_scope: str = "shared",
) -> ServiceApp:
    """The whole service: domain facade, conductor workers, power sync, Flask app and pipeline.

    *run_conductor*: run *conductor_workers* conductor threads (and the power sync every
    *power_sync_interval* seconds, 0: never) in this process.  *healthcheck*: serve
    ``/healthcheck`` in front of the stack.  *auth*, *lease*, *missing_scope*: see :func:`wrap`.
    *public_endpoint*: the base URL of links and ``Location`` headers (``None``: the
    request's Host header; see :func:`baremetal_service.handlers.routes.create_flask_app`).
    *authorizer*: the access rules applied before each handler (:func:`access_rules`; ``None``:
    every caller may do everything, as Ironic without Keystone).
    """
    service = make_service(
        database_url,
        conductor_workers=conductor_workers if run_conductor else 0,
        enabled_hardware_types=enabled_hardware_types,
        etag_key=etag_key,
    )
    closers: list[Any] = []
    try:
        if run_conductor:
            closers.extend(start_power_sync(service, power_sync_interval))
        flask_app = create_app(service, public_endpoint=public_endpoint, authorizer=authorizer)
        wsgi = wrap(flask_app.wsgi_app, store_url=store_url, closers=closers, auth=auth, lease=lease,
                    missing_scope=missing_scope)  # fmt: skip
        if healthcheck:
            wsgi = with_healthcheck(wsgi, service, closers)
    except BaseException:
        for closer in reversed(closers):
            closer.close()
        service.close()
        raise
    return ServiceApp(wsgi, service, closers)


# -- from settings (the environment, the CLI) -----------------------------------------------------


def auth_filter(conf: Mapping[str, Any]) -> Any:
    """The auth filter the settings name (``http_basic``, ``keystone``), or None (``noauth``).

    The user file (or the keystone configuration) is read now: a missing or bad file fails
    before the service is built.
    """
    if conf["auth_strategy"] == "keystone":
        return keystone.auth_filter(keystone.load_config(conf["config_files"], required=True))
    if conf["auth_strategy"] != "http_basic":
        return None
    kwargs: dict[str, Any] = {"user_file": conf["htpasswd"], "project_id": conf["auth_project"]}
    BasicAuthMiddleware(lambda e, s: [], **kwargs)

    def _wrap(app: WSGIApplication) -> WSGIApplication:
        return BasicAuthMiddleware(app, **kwargs)

    return _wrap


def access_rules(conf: Mapping[str, Any]) -> Any:
    """The access rules the settings call for: Ironic's policy
    (:func:`baremetal_service.keystone.authorizer`), for every request with ``keystone``, else
    for the requests a keystonemiddleware ``auth_token`` the paste pipeline names validated."""
    tokens_only = conf["auth_strategy"] != "keystone"
    return keystone.authorizer(keystone.load_config(conf["config_files"]), tokens_only=tokens_only)


class _WorkerPid:
    """Adds ``X-Baremetal-Worker-Pid`` (debug only: which process answered)."""

    def __init__(self, app: WSGIApplication) -> None:
        self.app = app

    def __call__(self, environ: WSGIEnvironment, start_response: StartResponse) -> Iterable[bytes]:
        header = (WORKER_PID_HEADER, str(os.getpid()))  # read per call: correct after a fork

        def _start(status: str, headers: list[tuple[str, str]], exc_info: Any = None) -> Any:
            return start_response(status, [*headers, header], exc_info)

        return self.app(environ, _start)


def build(conf: Mapping[str, Any]) -> ServiceApp:
    """The whole service from a settings dict (:func:`baremetal_service.settings.from_environ`).

    With ``paste_ini`` the pipeline comes from that file (whose ``[DEFAULT]`` decides the
    database and store the settings leave at ``None``); otherwise it is built in code.
    ``/healthcheck`` is added in front unless the paste pipeline already starts with it;
    the replay store is checked against ``processes`` once built.
    """
    if conf["paste_ini"]:
        built = load_paste_app(
            conf["paste_ini"],
            database_url=conf["database"],
            store_url=conf["store"],
            run_conductor=conf["conductor_workers"] > 0,
            etag_key=conf["etag_key"],
            public_endpoint=conf["public_endpoint"],
            auth_strategy=conf["auth_strategy"],
            config_files=conf["config_files"],
        )
    else:
        built = build_app(
            conf["database"] or settings.DATABASE,
            conf["store"] or settings.STORE,
            run_conductor=conf["conductor_workers"] > 0,
            conductor_workers=conf["conductor_workers"],
            enabled_hardware_types=conf["enabled_hardware_types"],
            power_sync_interval=conf["power_sync_interval"],
            etag_key=conf["etag_key"],
            healthcheck=False,
            auth=auth_filter(conf),
            lease=conf["idempotency_lease"],
            public_endpoint=conf["public_endpoint"],
            authorizer=access_rules(conf),
            # behind Keystone every caller has a project or the system scope
            missing_scope="reject" if conf["auth_strategy"] == "keystone" else "shared",
        )
    try:
        if conf["healthcheck"] and not isinstance(built.wsgi, HealthRoute):
            # (a paste pipeline that starts with the healthcheck filter already serves it)
            built.wsgi = with_healthcheck(built.wsgi, built.service, built._closers)
        if conf["debug_worker_header"]:
            built.wsgi = _WorkerPid(built.wsgi)
        check_built_store(built, conf["processes"])
    except BaseException:
        built.close()
        raise
    return built


def make_application(env: Mapping[str, str] | None = None) -> ServiceApp:
    """Build the whole service for this process from *env* (default ``os.environ``)."""
    return build(settings.from_environ(env))


#: attributes through which one layer of a built stack reaches the next (ours, apimw's, paste's)
_INNER: Final = ("wsgi", "app", "_app", "application", "_closers")


def _layers(app: Any, *, into_service: bool = True) -> Iterator[Any]:
    """The objects of a built stack, outermost first, each reached from the one before through
    :data:`_INNER` (at most 200).  *into_service*: also walk into the :class:`ServiceApp`
    found inside (a paste pipeline ends in one)."""
    todo: deque[Any] = deque([app])
    seen: set[int] = set()
    while todo and len(seen) < 200:
        obj = todo.popleft()
        if obj is None or id(obj) in seen or isinstance(obj, (str, bytes, int, float, dict, type)):
            continue
        seen.add(id(obj))
        if isinstance(obj, (list, tuple)):
            todo.extend(obj)
            continue
        yield obj
        if into_service or not isinstance(obj, ServiceApp):
            todo.extend(getattr(obj, name, None) for name in _INNER)


def replay_store(app: Any) -> Any:
    """The replay store of the :class:`apimw.idempotency.IdempotencyMiddleware` in a built stack;
    ``None`` when the stack has none."""
    return next((layer.store for layer in _layers(app) if isinstance(layer, IdempotencyMiddleware)), None)


def check_built_store(app: Any, processes: int) -> None:
    """Refuse a built stack whose replay store is ``memory://`` when several processes serve.

    Whatever the environment said: a paste file decides the store of its own pipeline.
    """
    store = replay_store(app)
    if store is not None:
        settings.check_store_processes(store.name, processes)


# -- paste.deploy ----------------------------------------------------------------------------


def app_factory(global_conf: Mapping[str, Any], **local_conf: str) -> ServiceApp:
    """``[app:baremetal] paste.app_factory = baremetal_service.deploy:app_factory``: the bare Flask app.

    The etag key: the one :func:`load_paste_app` was given (``BAREMETAL_ETAG_KEY``,
    ``--etag-key-file``), else an ``etag_key`` ini value, else a random key per process.
    ``auth_strategy = keystone`` (in the section, or ``--auth-strategy keystone``) applies
    Ironic's access rules, with the ``[oslo_policy]`` of ``config_file`` (comma separated).
    """
    conf = {**global_conf, **local_conf}
    files = [f.strip() for f in str(conf.get("config_file") or "").split(",") if f.strip()]
    rules = access_rules(
        {"auth_strategy": conf.get("auth_strategy", settings.AUTH_STRATEGY), "config_files": files}
    )
    run_conductor = str(conf.get("run_conductor", settings.RUN_CONDUCTOR)).lower() in settings.TRUE_VALUES
    types = conf.get("enabled_hardware_types")
    interval = conf.get("power_sync_interval")
    endpoint = settings.public_endpoint(conf.get("public_endpoint"))
    instance = global_conf.get("instance")
    etag_key = _ETAG_KEYS.get(str(instance)) if instance else None
    try:
        sync_interval = settings.POWER_SYNC_INTERVAL if interval is None else float(interval)
    except ValueError:
        raise ConfigError(f"power_sync_interval must be a number of seconds, got {interval!r}") from None
    service = make_service(
        conf.get("database", settings.DATABASE),
        conductor_workers=1 if run_conductor else 0,
        enabled_hardware_types=[t.strip() for t in types.split(",") if t.strip()]
        if types
        else settings.HARDWARE_TYPES,
        etag_key=etag_key or conf.get("etag_key") or None,
    )
    try:
        closers = start_power_sync(service, sync_interval) if run_conductor else []
        app = ServiceApp(
            create_app(service, public_endpoint=endpoint, authorizer=rules).wsgi_app, service, closers
        )
    except BaseException:
        service.close()
        raise
    if instance:
        _CREATED[str(instance)] = app
    return app


#: ServiceApps built by app_factory, by the ``instance`` load_paste_app passed (so it can close them).
_CREATED: dict[str, ServiceApp] = {}
#: The etag key load_paste_app was given, by ``instance``: kept out of the paste config, whose
#: interpolation would choke on a ``%`` in the key and which paste hands to every filter.
_ETAG_KEYS: dict[str, str | bytes] = {}


def load_paste_app(
    ini_path: str | Path = PASTE_INI,
    *,
    database_url: str | None = None,
    store_url: str | None = None,
    run_conductor: bool = settings.RUN_CONDUCTOR,
    name: str = "main",
    etag_key: str | bytes | None = None,
    public_endpoint: str | None = None,
    auth_strategy: str | None = None,
    config_files: Iterable[str] = (),
) -> ServiceApp:
    """Load the pipeline from *ini_path* with the given database, store and etag key (and the
    public endpoint, which overrides the ini's ``public_endpoint``).  *auth_strategy*
    ``keystone`` applies Ironic's access rules in the app (the file brings auth_token) with
    the ``[oslo_policy]`` of *config_files*; ``None`` leaves it to the file.

    A *database_url* or *store_url* given here overrides the file's ``[DEFAULT]``; one not given
    leaves the file's own ``[DEFAULT] database`` / ``store`` in force, and the built-in default
    fills in only where the file names none.  (paste's global conf overrides ``[DEFAULT]``: a
    default passed whatever the file said would silently replace the store the file names.)
    """
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
    if auth_strategy:
        global_conf["auth_strategy"] = auth_strategy
    if config_files:
        global_conf["config_file"] = ",".join(config_files)
    if etag_key is not None:
        _ETAG_KEYS[instance] = etag_key
    try:
        pipeline = loadapp(f"config:{Path(ini_path).resolve()}", name=name, global_conf=global_conf)
    finally:
        _ETAG_KEYS.pop(instance, None)
    inner = _CREATED.pop(instance, None)
    if inner is None:
        raise RuntimeError(f"{ini_path}: the pipeline does not end in baremetal_service.deploy:app_factory")
    # the inner app's closers (power sync), then the pipeline's (idempotency store, health checks)
    return ServiceApp(pipeline, inner.service, [*inner._closers, *_closables(pipeline)])


def _paste_defaults(ini_path: str | Path) -> frozenset[str]:
    """The keys the paste file's own ``[DEFAULT]`` section names."""
    parser = configparser.ConfigParser(interpolation=None, strict=False)
    parser.read(ini_path)
    return frozenset(parser.defaults())


def _closables(pipeline: Any) -> list[Any]:
    """Middlewares in a paste pipeline that hold resources (the idempotency store, health checks)."""
    return [
        layer
        for layer in _layers(pipeline, into_service=False)
        if not isinstance(layer, ServiceApp) and callable(getattr(layer, "close", None))
    ]


# -- the serving process ------------------------------------------------------------------------

#: The young-generation threshold once the application is built (CPython's default: 700).
GC_YOUNG_THRESHOLD: Final = 10_000


def tune_gc() -> None:
    """The serving process's garbage collector, once the application is built (measured in
    docs/example/performance.md, "The garbage collector").

    A request that renders 100 node documents allocates tens of thousands of dicts and lists
    that all stay alive until the response is written: with CPython's default threshold
    each ran several young passes that walked (and promoted) them all, and now and then a
    full pass over the ~126,000 objects of the loaded application.  ``gc.freeze()`` moves the
    started application (modules, the Flask app, SQLAlchemy metadata) to a permanent
    generation no pass walks again, and a young threshold of :data:`GC_YOUNG_THRESHOLD` makes a
    pass during a request rare.  Cycles are still collected, a little later.
    """
    gc.collect()  # what start-up left as garbage goes now, not into the permanent generation
    gc.freeze()
    young, middle, old = gc.get_threshold()
    gc.set_threshold(max(GC_YOUNG_THRESHOLD, young), middle, old)


#: Free memory glibc's malloc keeps at the top of a heap instead of giving it back to the
#: system (``M_TOP_PAD``; glibc's default: 128 KiB).
MALLOC_TOP_PAD: Final = 16 * 1024 * 1024
#: ``M_TOP_PAD``'s number for ``mallopt`` (glibc's ``malloc.h``).
_M_TOP_PAD: Final = -2


def tune_malloc() -> bool:
    """The serving process's C allocator (glibc): keep :data:`MALLOC_TOP_PAD` free at the top
    of its heaps (measured in docs/example/performance.md, "The read path of GET node and GET detail").

    A 100-node detail page allocates and frees about a megabyte (its documents' encoded
    bodies, the joined answer): with glibc's default each request grew the heap, gave the
    memory back when it freed it, and touched it anew on the next request -- about 290 page
    faults, a quarter of the request's time.  With the pad the memory stays mapped between
    requests (the process's RSS keeps up to the pad more after a large answer).  ``True``
    when set; elsewhere than glibc nothing is done (``False``).
    """
    if platform.libc_ver()[0] != "glibc":
        return False
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return False
    return bool(mallopt(_M_TOP_PAD, MALLOC_TOP_PAD))


_APP: dict[str, ServiceApp] = {}
_APP_LOCK = threading.Lock()


def __getattr__(name: str) -> Any:
    """``application``: built on first access, once per process."""
    if name != "application":
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    with _APP_LOCK:
        if "app" not in _APP:
            _APP["app"] = make_application()
            tune_gc()
            tune_malloc()
        return _APP["app"]


def close_application() -> None:
    """Close this process's application if it was built (gunicorn's worker_exit hook calls it)."""
    with _APP_LOCK:
        app = _APP.pop("app", None)
    if app is not None:
        app.close()
