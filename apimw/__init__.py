"""apimw: WSGI middlewares for OpenStack-style REST APIs.

Microversion negotiation, etag optimistic concurrency and ``X-Client-Token``
idempotent replay, composable in paste.deploy pipelines, Flask, or plain WSGI.
The client-side negotiator lives in :mod:`apimw.client` (needs ``requests``);
the SQLAlchemy etag helpers in :mod:`apimw.etag_db`.

``apimw.__version__`` is the installed distribution's version (its package metadata).
"""

from __future__ import annotations

import importlib.metadata

from apimw._microversion_type import Version, parse_version
from apimw.errors import ApimwError, ConfigError, HTTPProblem, StoreError, VersionParseError
from apimw.etag import ETagGenerator, ETagMiddleware
from apimw.idempotency import IdempotencyMiddleware
from apimw.microversion import (
    MicroversionMiddleware,
    VersionedFields,
    VersionGate,
    require_version,
    served_version,
)

__all__ = [
    "ApimwError",
    "ConfigError",
    "ETagGenerator",
    "ETagMiddleware",
    "HTTPProblem",
    "IdempotencyMiddleware",
    "MicroversionMiddleware",
    "StoreError",
    "Version",
    "VersionGate",
    "VersionParseError",
    "VersionedFields",
    "__version__",
    "parse_version",
    "require_version",
    "served_version",
]

try:
    __version__ = importlib.metadata.version("apimw")  # one source: pyproject.toml
except importlib.metadata.PackageNotFoundError:  # a source tree on sys.path that was never installed
    __version__ = "0+unknown"
