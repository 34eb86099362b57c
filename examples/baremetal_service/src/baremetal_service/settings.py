"""The service's settings: the defaults, and the ``BAREMETAL_*`` environment read and checked.

The CLI (:mod:`.cli`), the WSGI entry point and the in-code pipeline (:mod:`.deploy`),
the gunicorn configuration (:mod:`.servers.gunicorn_conf`) and the shipped
``api-paste.ini`` (its ``[DEFAULT]`` section, which a test compares with these values)
all start from the defaults below.  :func:`from_environ` turns the environment into the
one settings dict every entry point builds the service from (the CLI lays its options
over it):

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
                                                                   ``http_basic`` (htpasswd + bcrypt),
                                                                   ``keystone`` (auth_token and Ironic's
                                                                   access rules, :mod:`.keystone`)
``BAREMETAL_CONFIG_FILE``          (none)                          ``keystone``: the oslo.config file(s),
                                                                   comma separated, with
                                                                   ``[keystone_authtoken]`` and
                                                                   ``[oslo_policy]`` (none: the file
                                                                   ``/etc/baremetal/baremetal.conf``
                                                                   if it exists)
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
``BAREMETAL_WORKER_PROCESSES``     ``1``                           how many processes serve (gunicorn_conf.py
                                                                   sets it); ``memory://`` refuses more than 1
``BAREMETAL_DEBUG_WORKER_HEADER``  ``false``                       add ``X-Baremetal-Worker-Pid`` to responses
                                                                   (tests and load checks, never production)
=================================  ==============================  ===========================================

A bad value is a :class:`apimw.errors.ConfigError` with one clear sentence.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Mapping
from typing import Any, Final, TypeVar
from urllib.parse import urlsplit

from apimw.errors import ConfigError

__all__ = [
    "AUTH_STRATEGIES",
    "AUTH_STRATEGY",
    "CONNECTION_LIMIT",
    "DATABASE",
    "HARDWARE_TYPES",
    "HOST",
    "HTPASSWD",
    "IDEMPOTENCY_LEASE",
    "IDLE_TIMEOUT",
    "PORT",
    "PUBLIC_ENDPOINT",
    "POWER_SYNC_INTERVAL",
    "RUN_CONDUCTOR",
    "SERVER",
    "STORE",
    "THREADS",
    "TRUE_VALUES",
    "check_store_processes",
    "from_environ",
    "public_endpoint",
]

#: Where to listen (the CLI and gunicorn).
HOST: Final = "127.0.0.1"
PORT: Final = 6385
#: A SQLite file in the current directory.
DATABASE: Final = "sqlite:///baremetal.sqlite"
#: The idempotency replay store (in-process: one process only).
STORE: Final = "memory://"
#: Seconds a client-token claim lives while the request runs (apimw's ``lease``): after a
#: worker crash, retries get 409 until it ends.  Keep it above the worker timeout.
IDEMPOTENCY_LEASE: Final = 300.0
#: ``noauth`` (trusts X-Project-Id), ``http_basic`` (htpasswd file, bcrypt entries) or
#: ``keystone`` (keystonemiddleware's auth_token and Ironic's access rules).
AUTH_STRATEGY: Final = "noauth"
AUTH_STRATEGIES: Final = ("noauth", "http_basic", "keystone")
HTPASSWD: Final = "/etc/baremetal/htpasswd"
#: Hardware types enabled.
HARDWARE_TYPES: Final[tuple[str, ...]] = ("fake-hardware",)
#: Seconds between power-state syncs with the BMCs; 0 turns the sync off.
POWER_SYNC_INTERVAL: Final = 60.0
#: Whether this process runs the conductor workers.
RUN_CONDUCTOR: Final = True
#: The CLI's HTTP server: ``waitress`` or ``granian`` (docs/example/baremetal-service.md, "Server").
SERVER: Final = "waitress"
#: The CLI server's worker threads, connection limit (per process) and idle timeout (seconds).
THREADS: Final = 8
CONNECTION_LIMIT: Final = 10000
IDLE_TIMEOUT: Final = 30

#: The URL links and ``Location`` headers start with (Ironic's ``[api]public_endpoint``), such
#: as ``https://baremetal.example.com:6385`` behind a proxy; None: the request's own scheme
#: and Host header (and script name), as Ironic does without one.
PUBLIC_ENDPOINT: Final[str | None] = None

#: What a public endpoint may hold: printable ASCII without spaces, quotes, angle
#: brackets, backslashes or braces (RFC 3986's characters), nothing a header cannot carry.
_URL_CHARS: Final = re.compile(r"[A-Za-z0-9\-._~:/\[\]@!$&'()*+,;=%]+")


def public_endpoint(value: str | None) -> str | None:
    """*value* checked as a public endpoint (an ``http``/``https`` URL with a host, no query,
    no fragment), without its trailing slash; ``None`` or blank gives ``None``.

    Raises :class:`apimw.errors.ConfigError` with one sentence otherwise.
    """
    if value is None or not value.strip():
        return None
    url = value.strip()
    parts = urlsplit(url) if _URL_CHARS.fullmatch(url) else None
    if (
        parts is None
        or parts.scheme not in ("http", "https")
        or not parts.hostname
        or parts.query
        or parts.fragment
        or "@" in parts.netloc
    ):
        raise ConfigError(
            f"the public endpoint must be an http:// or https:// URL with a host and no query, "
            f"such as https://baremetal.example.com:6385, got {value!r}"
        )
    try:
        parts.port  # noqa: B018 - raises ValueError for a port out of range or not a number
    except ValueError:
        raise ConfigError(f"the public endpoint has an invalid port: {value!r}") from None
    return url.rstrip("/")


MEMORY_STORE_MESSAGE: Final = (
    "the memory:// idempotency store cannot be used with {processes} worker processes: each process "
    "would keep its own records, so a retried X-Client-Token request reaching another process would "
    "run again (a second node). Set BAREMETAL_STORE to a shared store (redis://host:6379/0 or "
    "memcached://host:11211), or run a single worker process."
)


def check_store_processes(store_url: str, processes: int) -> None:
    """Refuse ``memory://`` when more than one process serves (the one-line reason is the message).

    Before anything is built this can only judge the configured URL; once the stack is
    built, :func:`baremetal_service.deploy.check_built_store` judges the store it holds.
    """
    if processes > 1 and urlsplit(store_url).scheme.lower() == "memory":
        raise ConfigError(MEMORY_STORE_MESSAGE.format(processes=processes))


#: What a yes/no setting accepts as yes (and as no).
TRUE_VALUES: Final = frozenset({"1", "true", "yes", "on"})
_FALSE: Final = frozenset({"0", "false", "no", "off", ""})


def _flag(env: Mapping[str, str], name: str, default: bool) -> bool:
    value = env.get(name)
    if value is None:
        return default
    lowered = value.strip().lower()
    if lowered in TRUE_VALUES:
        return True
    if lowered in _FALSE:
        return False
    raise ConfigError(f"{name} must be true or false, got {value!r}")


_N = TypeVar("_N", int, float)


def _number(env: Mapping[str, str], name: str, parse: Callable[[str], _N], what: str) -> _N | None:
    """*name*'s value read by *parse* (``int``, ``float``); ``None`` when unset or blank."""
    value = env.get(name)
    if value is None or not value.strip():
        return None
    try:
        return parse(value)
    except ValueError:
        raise ConfigError(f"{name} must be {what}, got {value!r}") from None


def _count(env: Mapping[str, str], name: str, default: int, minimum: int) -> int:
    number = _number(env, name, int, "an integer")
    if number is None:
        return default
    if number < minimum:
        raise ConfigError(f"{name} must be at least {minimum}, got {number}")
    return number


def _seconds(env: Mapping[str, str], name: str, default: float) -> float:
    number = _number(env, name, float, "a number of seconds")
    if number is None:
        return default
    if not number > 0 or number == float("inf"):
        raise ConfigError(f"{name} must be a positive number of seconds, got {env[name]!r}")
    return number


def _etag_key(env: Mapping[str, str]) -> str | None:
    value = env.get("BAREMETAL_ETAG_KEY")
    if value is not None and not value.strip():
        # BAREMETAL_ETAG_KEY=$(cat missing-file): a random key per process would follow, silently
        raise ConfigError("BAREMETAL_ETAG_KEY is set but empty: give it a key, or unset it for a random one")
    return value


def _public_endpoint(env: Mapping[str, str]) -> str | None:
    try:
        return public_endpoint(env.get("BAREMETAL_PUBLIC_ENDPOINT"))
    except ConfigError as exc:
        raise ConfigError(f"BAREMETAL_PUBLIC_ENDPOINT: {exc}") from None


def from_environ(env: Mapping[str, str] | None = None, *, check_processes: bool = True) -> dict[str, Any]:
    """The validated settings read from *env* (default ``os.environ``): plain values (JSON-able).

    ``database`` and ``store`` are ``None`` when the environment names none: the defaults
    above then apply, or a paste file's own ``[DEFAULT]``.  *check_processes*: refuse
    ``memory://`` with more than one process (:func:`check_store_processes`; the CLI checks
    its own ``--store`` and ``--workers``).
    """
    env = os.environ if env is None else env
    strategy = env.get("BAREMETAL_AUTH_STRATEGY", "").strip().lower() or AUTH_STRATEGY
    if strategy not in AUTH_STRATEGIES:
        raise ConfigError(
            f"BAREMETAL_AUTH_STRATEGY must be one of {', '.join(AUTH_STRATEGIES)}, got {strategy!r}"
        )
    conf: dict[str, Any] = {
        "database": env.get("BAREMETAL_DATABASE") or None,
        "store": env.get("BAREMETAL_STORE") or None,
        "idempotency_lease": _seconds(env, "BAREMETAL_IDEMPOTENCY_LEASE", IDEMPOTENCY_LEASE),
        "auth_strategy": strategy,
        "htpasswd": env.get("BAREMETAL_HTPASSWD") or HTPASSWD,
        "auth_project": env.get("BAREMETAL_AUTH_PROJECT") or None,
        "config_files": [f.strip() for f in env.get("BAREMETAL_CONFIG_FILE", "").split(",") if f.strip()],
        "paste_ini": env.get("BAREMETAL_PASTE_INI") or None,
        "etag_key": _etag_key(env),
        "public_endpoint": _public_endpoint(env),
        "conductor_workers": _count(env, "BAREMETAL_CONDUCTOR_WORKERS", 1, 0),
        "enabled_hardware_types": list(HARDWARE_TYPES),
        "power_sync_interval": POWER_SYNC_INTERVAL,
        "healthcheck": _flag(env, "BAREMETAL_HEALTHCHECK", True),
        "processes": max(
            _count(env, "BAREMETAL_WORKER_PROCESSES", 1, 1), _count(env, "WEB_CONCURRENCY", 1, 1)
        ),
        "debug_worker_header": _flag(env, "BAREMETAL_DEBUG_WORKER_HEADER", False),
    }
    if check_processes and not conf["paste_ini"]:  # a paste file's own store is judged once built
        check_store_processes(conf["store"] or STORE, conf["processes"])
    return conf
