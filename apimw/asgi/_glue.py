"""ASGI plumbing the three ASGI middlewares share: request headers, answers, request bodies.

No rule lives here: the middlewares ask the sans-IO decisions of their cores
(:meth:`apimw._microversion_core.MicroversionCore.decide`, :meth:`apimw.etag.ETagRules.decide`,
the store calls :class:`apimw._idempotency_rules.IdempotencyRules` yields) and this module moves
ASGI messages to and from them.  :func:`header_environ` and :func:`add_request_keys` build the
PEP 3333 view of a request (``HTTP_*``, ``PATH_INFO``...) that the idempotency rules and the
deployment's ``scope`` function read on either door; it is a dict of its own, never written
into the ASGI scope.
"""

from __future__ import annotations

import io
import sys
from collections.abc import Awaitable, Callable, Collection, Iterable, MutableMapping
from typing import Any, Final, TypeVar

from apimw._idempotency_capture import Ops
from apimw.discovery import base_url

Scope = dict[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]
RawHeaders = list[tuple[bytes, bytes]]
Headers = list[tuple[str, str]]

_T = TypeVar("_T")


# -- the request ------------------------------------------------------------------------------


def header_values(raw: Iterable[tuple[bytes, bytes]], *names: bytes) -> list[str | None]:
    """The values of the request headers *names* (lower case), ``None`` when absent; repeated
    lines joined with ``,`` as WSGI servers join them."""
    found: list[str | None] = [None] * len(names)
    for name, value in raw:
        if name in names:
            i = names.index(name)
            text = value.decode("latin-1")
            found[i] = text if found[i] is None else f"{found[i]},{text}"
    return found


#: header name (as the server gives it) -> CGI key; names repeat from request to request
_KEYS: dict[bytes, str] = {}
_KEYS_MAX: Final = 1024


def _header_key(name: bytes) -> str:
    """The environ key of the request header *name* (``HTTP_X_CLIENT_TOKEN``, ``CONTENT_TYPE``)."""
    key = _KEYS.get(name)
    if key is None:
        key = name.decode("latin-1").upper().replace("-", "_")
        if key != "CONTENT_TYPE" and key != "CONTENT_LENGTH":
            key = "HTTP_" + key
        if len(_KEYS) < _KEYS_MAX:
            _KEYS[name] = key
    return key


def path_info(scope: Scope) -> str:
    """``PATH_INFO``: the path below ``root_path``, its UTF-8 bytes as latin-1 (PEP 3333)."""
    path: str = scope.get("path", "/")
    root: str = scope.get("root_path", "")
    if root and path.startswith(root):
        path = path[len(root) :]
    return path if path.isascii() else path.encode("utf-8").decode("latin-1")


def header_environ(raw: Iterable[tuple[bytes, bytes]]) -> dict[str, Any]:
    """The PEP 3333 keys of the request headers *raw*: ``HTTP_*``, ``CONTENT_TYPE``, ``CONTENT_LENGTH``."""
    environ: dict[str, Any] = {}
    keys = _KEYS
    for name, value in raw:
        key = keys.get(name) or _header_key(name)
        text = value.decode("latin-1")
        if key in environ:  # repeated lines are joined, as WSGI servers join them
            text = environ[key] + ("; " if key == "HTTP_COOKIE" else ",") + text
        environ[key] = text
    return environ


#: the PEP 3333 keys every request of an ASGI server has alike
_SERVER_KEYS: Final = {
    "wsgi.version": (1, 0),
    "wsgi.multithread": True,
    "wsgi.multiprocess": False,
    "wsgi.run_once": False,
    # ASGI bodies are framed: reading to the end is reading the body
    "wsgi.input_terminated": True,
}


def add_request_keys(scope: Scope, environ: dict[str, Any]) -> None:
    """Set in *environ* the PEP 3333 keys of the request *scope* describes, but its headers
    (``REQUEST_METHOD``, ``PATH_INFO``, ``SERVER_NAME``, ``wsgi.url_scheme``...)."""
    server = scope.get("server") or ("localhost", None)
    client = scope.get("client")
    scheme = scope.get("scheme", "http")
    root = scope.get("root_path", "")
    environ.update(_SERVER_KEYS)
    environ["REQUEST_METHOD"] = scope["method"]
    environ["SCRIPT_NAME"] = root if root.isascii() else root.encode("utf-8").decode("latin-1")
    environ["PATH_INFO"] = path_info(scope)
    environ["QUERY_STRING"] = scope.get("query_string", b"").decode("latin-1")
    environ["SERVER_NAME"] = str(server[0])
    environ["SERVER_PORT"] = str(server[1] or (443 if scheme == "https" else 80))
    environ["SERVER_PROTOCOL"] = "HTTP/" + scope.get("http_version", "1.1")
    environ["REMOTE_ADDR"] = client[0] if client else ""
    environ["wsgi.url_scheme"] = scheme
    environ["wsgi.errors"] = sys.stderr


def set_request_headers(scope: Scope, drop: Collection[bytes], add: RawHeaders) -> None:
    """Rewrite the scope's request ``headers`` (a new list: the server's is not changed): the
    lines named in *drop* (lower case) are dropped, the lines *add* appended in order."""
    headers = scope.get("headers", ())
    if drop:
        headers = [line for line in headers if line[0] not in drop]
    scope["headers"] = [*headers, *add]


# -- the answer -------------------------------------------------------------------------------


def rereadable(start: Message) -> Message:
    """The ``http.response.start`` *start* with ``headers`` that can be read more than once
    (ASGI allows any iterable; a generator is read once): as it came when they are a list."""
    headers = start.get("headers", ())
    if isinstance(headers, (list, tuple)):
        return start
    return {**start, "headers": list(headers)}


#: response header name -> its ASGI name; names repeat from answer to answer
_RAW_NAMES: dict[str, bytes] = {}


def _raw_name(name: str) -> bytes:
    raw = name.lower().encode("latin-1")
    if len(_RAW_NAMES) < _KEYS_MAX:
        _RAW_NAMES[name] = raw
    return raw


def raw_headers(headers: Iterable[tuple[str, str]]) -> RawHeaders:
    """ASGI's header lines: names in lower case (Starlette's ``Headers`` and HTTP/2 expect it)."""
    names = _RAW_NAMES
    return [(names.get(name) or _raw_name(name), value.encode("latin-1")) for name, value in headers]


def text_headers(raw: Iterable[tuple[bytes, bytes]]) -> Headers:
    return [(name.decode("latin-1"), value.decode("latin-1")) for name, value in raw]


async def send_answer(send: Send, status: int | str, headers: RawHeaders, body: bytes) -> None:
    """Send a whole answer; *status* a code or a status line (``"201 Created"``)."""
    code = status if isinstance(status, int) else int(status[:3])
    await send({"type": "http.response.start", "status": code, "headers": headers})
    await send({"type": "http.response.body", "body": body, "more_body": False})


async def send_text(send: Send, status: int | str, headers: Iterable[tuple[str, str]], body: bytes) -> None:
    """:func:`send_answer` with ``str`` headers (the rules' answers)."""
    await send_answer(send, status, raw_headers(headers), body)


# -- the request body (the idempotency middleware buffers it) -------------------------------


class DisconnectedInput(io.BytesIO):
    """The part of the body that arrived before the client disconnected, as a ``wsgi.input``:
    reading past it raises ``OSError`` (what a WSGI server's input does)."""

    def read(self, size: int | None = -1) -> bytes:
        data = super().read(size)
        if size is None or size < 0 or len(data) < size:
            raise OSError("the client disconnected while sending the body")
        return data


async def receive_body(receive: Receive, limit: int) -> io.BytesIO:
    """The request body's messages as a ``wsgi.input``, up to the end or past *limit* bytes
    (the rules answer 413)."""
    chunks: list[bytes] = []
    size = 0
    while size <= limit:
        message = await receive()
        if message["type"] == "http.disconnect":
            return DisconnectedInput(b"".join(chunks))
        chunk = message.get("body", b"")
        if chunk:
            chunks.append(bytes(chunk))
            size += len(chunk)
        if not message.get("more_body", False):
            break
    return io.BytesIO(chunks[0] if len(chunks) == 1 else b"".join(chunks))


class Replay:
    """The app's ``receive``: the body the middleware already read, then the server's (disconnect)."""

    __slots__ = ("body", "server_receive")

    def __init__(self, body: bytes, receive: Receive) -> None:
        self.body: bytes | None = body
        self.server_receive = receive

    async def receive(self) -> Message:
        body, self.body = self.body, None
        if body is None:
            return await self.server_receive()
        return {"type": "http.request", "body": body, "more_body": False}


# -- store calls ------------------------------------------------------------------------------


async def await_ops(ops: Ops[_T], store: Any) -> _T:
    """Await the sans-IO store calls *ops* on the asyncio *store* (see
    :func:`apimw._idempotency_capture.run_ops`, the blocking twin of this loop)."""
    result: Any = None
    error: BaseException | None = None
    while True:
        try:
            op = ops.send(result) if error is None else ops.throw(error)
        except StopIteration as done:
            return done.value  # type: ignore[no-any-return]
        result = error = None
        try:
            result = await op.call(store)
        except BaseException as exc:  # noqa: BLE001 - thrown back into the rules, which decide
            error = exc


def scope_base_url(scope: Scope) -> str:
    """``scheme://host[:port]/root_path`` of the request *scope* describes (its ``Host``
    header, else the server's address), without a trailing slash."""
    host = header_values(scope.get("headers", ()), b"host")[0]
    server = scope.get("server") or ("localhost", None)
    root: str = scope.get("root_path", "")
    root = root if root.isascii() else root.encode("utf-8").decode("latin-1")
    port = "" if server[1] is None else str(server[1])
    return base_url(scope.get("scheme", "http"), host, str(server[0]), port, root)
