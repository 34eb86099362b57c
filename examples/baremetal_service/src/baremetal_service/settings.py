"""The service's settings defaults: the one source the entry points read.

The CLI (:mod:`.cli`), the WSGI entry point (:mod:`.wsgi`, ``BAREMETAL_*`` variables),
the gunicorn configuration (:mod:`.gunicorn_conf`), the in-code pipeline (:mod:`.app`)
and the shipped ``api-paste.ini`` (its ``[DEFAULT]`` section, which a test compares
with these values) all start from the defaults below.
"""

from __future__ import annotations

import re
from typing import Final
from urllib.parse import urlsplit

from apimw.errors import ConfigError

__all__ = [
    "AUTH_STRATEGY",
    "CONNECTION_LIMIT",
    "DATABASE",
    "FAST_READS",
    "FAST_VALIDATION",
    "FAST_WRITES",
    "HARDWARE_TYPES",
    "HOST",
    "HTPASSWD",
    "IDEMPOTENCY_LEASE",
    "IDLE_TIMEOUT",
    "PORT",
    "PUBLIC_ENDPOINT",
    "POWER_SYNC_INTERVAL",
    "REQUEST_ID",
    "RUN_CONDUCTOR",
    "SERVER",
    "STORE",
    "THREADS",
    "public_endpoint",
]

#: Where to listen (the CLI and gunicorn).
HOST: Final = "127.0.0.1"
PORT: Final = 6385
#: A SQLite file in the current directory.
DATABASE: Final = "sqlite:///baremetal.sqlite"
#: One-row reads on the driver's cursor with statements compiled once (False: SQLAlchemy Core).
FAST_READS: Final = True
#: The fixed-shape statements of creates, updates and deletes compiled once and run on the
#: driver's cursor in the same transaction (False: SQLAlchemy Core builds and runs each).
FAST_WRITES: Final = True
#: Request bodies checked by schema validators compiled once (api/fast_schema.py); jsonschema
#: words the 400 of a refused body either way (False: jsonschema decides every body).
FAST_VALIDATION: Final = True
#: The idempotency replay store (in-process: one process only).
STORE: Final = "memory://"
#: Seconds a client-token claim lives while the request runs (apimw's ``lease``): after a
#: worker crash, retries get 409 until it ends.  Keep it above the worker timeout.
IDEMPOTENCY_LEASE: Final = 300.0
#: ``noauth`` (trusts X-Project-Id) or ``http_basic`` (htpasswd file, bcrypt entries).
AUTH_STRATEGY: Final = "noauth"
HTPASSWD: Final = "/etc/baremetal/htpasswd"
#: Hardware types enabled.
HARDWARE_TYPES: Final[tuple[str, ...]] = ("fake-hardware",)
#: Seconds between power-state syncs with the BMCs; 0 turns the sync off.
POWER_SYNC_INTERVAL: Final = 60.0
#: The request-id middleware: ``builtin`` (baremetal_service.request_id, no webob) or ``oslo``
#: (oslo.middleware's RequestId); both give every answer an ``x-openstack-request-id``.
REQUEST_ID: Final = "builtin"
#: Whether this process runs the conductor workers.
RUN_CONDUCTOR: Final = True
#: The CLI's HTTP server: ``waitress`` or ``granian`` (docs/baremetal-service.md, "Server").
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
