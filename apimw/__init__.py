"""apimw: WSGI middlewares for OpenStack-style REST APIs.

Microversion negotiation, etag optimistic concurrency and ``X-Client-Token``
idempotent replay, composable in paste.deploy pipelines, Flask, or plain WSGI.
The client-side negotiator lives in :mod:`apimw.client` (needs ``requests``);
the SQLAlchemy etag helpers in :mod:`apimw.etag_db`.

``import apimw`` imports none of its modules: each name below is imported from its module on
first use (module ``__getattr__``, PEP 562), so a process pays only for what it uses.
``apimw.__version__`` is the release, the one source of the distribution's version.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from apimw._microversion_type import Version, parse_version
    from apimw.errors import (
        ApimwError,
        ConfigError,
        HTTPProblem,
        StoreError,
        VersionParseError,
    )
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

_WHERE = {
    "ApimwError": "apimw.errors",
    "ConfigError": "apimw.errors",
    "ETagGenerator": "apimw.etag",
    "ETagMiddleware": "apimw.etag",
    "HTTPProblem": "apimw.errors",
    "IdempotencyMiddleware": "apimw.idempotency",
    "MicroversionMiddleware": "apimw.microversion",
    "StoreError": "apimw.errors",
    "Version": "apimw._microversion_type",
    "VersionGate": "apimw.microversion",
    "VersionParseError": "apimw.errors",
    "VersionedFields": "apimw.microversion",
    "parse_version": "apimw._microversion_type",
    "require_version": "apimw.microversion",
    "served_version": "apimw.microversion",
}


#: The release, read by the build (pyproject.toml's ``version`` is this attribute).
__version__ = "0.1.0"


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value: Any = getattr(importlib.import_module(module), name)
    globals()[name] = value  # once: later lookups do not come here
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
