"""apimw's three middlewares for ASGI 3 (Starlette, FastAPI, any ASGI server).

Each class takes the ASGI app first and the same keyword options as its WSGI twin
(:class:`apimw.microversion.MicroversionMiddleware`,
:class:`apimw.etag.ETagMiddleware`, :class:`apimw.idempotency.IdempotencyMiddleware`),
validated by the twin, and gives the same answers.  With FastAPI::

    app.add_middleware(ETagMiddleware, min_version="1.1")
    app.add_middleware(IdempotencyMiddleware, store="redis://127.0.0.1:6379/0", scope="shared")
    app.add_middleware(MicroversionMiddleware, service_type="baremetal",
                       min_version="1.1", max_version="1.9")

(the last added runs first).  What the middlewares hand the app is in the request's
scope under the ``apimw.`` keys of the WSGI middlewares: ``served_version(request.scope)``,
``if_match(request.scope)``, ``mark_enforced(request.scope)``, ``client_token(request.scope)``.
:func:`open_async_store` opens the asyncio replay store of a URL, for a service that closes
it itself (the WSGI door's is :func:`apimw.idempotency.open_store`).  See ``docs/asgi.md``.

The rules are the sans-IO cores the WSGI middlewares use too
(:class:`~apimw.microversion.MicroversionCore`, :class:`~apimw.etag.ETagRules`,
:class:`apimw._idempotency_rules.IdempotencyRules`); each ASGI middleware moves ASGI
messages to and from its core, and awaits the store calls the idempotency rules ask for on
an asyncio store.
"""

from __future__ import annotations

from apimw._microversion_type import Version
from apimw._stores.aio import open_async_store
from apimw.asgi.etag import ETagMiddleware
from apimw.asgi.idempotency import IdempotencyMiddleware
from apimw.asgi.microversion import MicroversionMiddleware
from apimw.etag import if_match, mark_enforced, set_response_etag
from apimw.idempotency import client_token
from apimw.microversion import served_version

__all__ = [
    "ETagMiddleware",
    "IdempotencyMiddleware",
    "MicroversionMiddleware",
    "Version",
    "client_token",
    "if_match",
    "mark_enforced",
    "open_async_store",
    "served_version",
    "set_response_etag",
]
