"""One request of an ASGI middleware: apimw's WSGI middleware runs it, its I/O is awaited.

Every rule of the three middlewares is written once, in their WSGI classes and the
sans-IO modules under them.  An ASGI middleware runs its WSGI twin for each HTTP
request in a greenlet (SQLAlchemy's asyncio bridge is the model): wherever the
twin would wait -- reading the request body, calling the app, a store round trip --
:func:`await_only` hands the awaitable to the event loop and resumes with its result,
so the twin's code runs unchanged while the loop serves other requests.

The request's environ *is* its ASGI scope, extended with the CGI keys of PEP 3333
(``REQUEST_METHOD``, ``PATH_INFO``, ``HTTP_*``...): what the middleware leaves there
(``apimw.microversion``, ``apimw.etag.if_match``, ``apimw.idempotency.token``) is
in the scope the app receives, so ``served_version(request.scope)`` and
``mark_enforced(request.scope)`` work as they do with an environ.  Request headers a
middleware rewrites (the microversion headers it forwards) are rewritten in the
scope's ``headers`` too.

The app's answer is buffered (as the etag and idempotency middlewares buffer it
anyway): the twin sees the status, headers and body, then the server gets them.
"""

from __future__ import annotations

import contextvars
import io
import sys
import threading
from collections.abc import Awaitable, Callable, Iterable, MutableMapping
from http import HTTPStatus
from typing import TYPE_CHECKING, Any, Final, TypeVar

import greenlet

if TYPE_CHECKING:
    from _typeshed.wsgi import StartResponse, WSGIApplication, WSGIEnvironment

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

T = TypeVar("T")


#: The server's ``receive``.
_ENVIRON_RECEIVE: Final = "apimw.asgi.receive"

_REASONS: Final = {s.value: f"{s.value} {s.phrase}" for s in HTTPStatus}


class _Finished:
    """What a runner hands back when its call is over: ``(True, result)`` or ``(False, exception)``."""

    __slots__ = ("outcome",)

    def __init__(self, outcome: tuple[bool, Any]) -> None:
        self.outcome = outcome


class _Runner(greenlet.greenlet):  # type: ignore[misc]
    """A greenlet that runs one request's WSGI middleware at a time, then waits for the next.

    Kept in a per-thread pool: creating a greenlet costs several microseconds, switching
    into a waiting one a fraction of one.
    """

    def __init__(self) -> None:
        super().__init__(self._serve)

    def _serve(self, fn: Callable[..., Any], args: tuple[Any, ...]) -> None:
        while True:
            try:
                outcome: tuple[bool, Any] = (True, fn(*args))
            except greenlet.GreenletExit:  # the runner is being collected mid-call: let it end
                raise
            except BaseException as exc:  # noqa: BLE001 - handed to run_sync, which raises it
                outcome = (False, exc)
            fn = args = None  # type: ignore[assignment]
            fn, args = self.parent.switch(_Finished(outcome))


_POOL = threading.local()
#: Idle runners kept per thread (more are created under more concurrency, then dropped).
_POOL_SIZE: Final = 256


def await_only(awaitable: Awaitable[T]) -> T:
    """The result of *awaitable*, awaited by the event loop while this greenlet waits.

    Only inside :func:`run_sync`; a plain call from the loop would block it.
    """
    current = greenlet.getcurrent()
    if not isinstance(current, _Runner):
        raise RuntimeError("apimw.asgi: await_only() outside a request of an ASGI middleware")
    return current.parent.switch(awaitable)  # type: ignore[no-any-return]


async def run_sync(fn: Callable[..., T], *args: Any) -> T:
    """``fn(*args)`` in a greenlet; each :func:`await_only` in it is awaited here."""
    idle: list[_Runner] | None = getattr(_POOL, "idle", None)
    if idle is None:
        idle = _POOL.idle = []
    runner = idle.pop() if idle else _Runner()
    runner.parent = greenlet.getcurrent()
    runner.gr_context = contextvars.copy_context()  # the middleware sees the request's context
    result = runner.switch(fn, args)
    while not isinstance(result, _Finished):
        try:
            value = await result
        except BaseException:  # noqa: BLE001 - handed to the waiting code, which may handle it
            result = runner.throw(*sys.exc_info())
        else:
            result = runner.switch(value)
    if len(idle) < _POOL_SIZE:
        idle.append(runner)
    ok, value = result.outcome
    if ok:
        return value  # type: ignore[no-any-return]
    raise value


# -- the request: scope -> environ ----------------------------------------------------------


class Input:
    """``wsgi.input`` over ASGI ``receive``: each read awaits the next ``http.request`` message."""

    def __init__(self, receive: Receive) -> None:
        self.receive = receive
        self.buffer = bytearray()
        self.more = True
        self.touched = False
        self.handed_end = False

    def _fill(self) -> None:
        message = await_only(self.receive())
        if message["type"] == "http.disconnect":
            raise OSError("the client disconnected while sending the body")
        self.buffer += message.get("body", b"")
        self.more = bool(message.get("more_body", False))

    def read(self, size: int | None = -1) -> bytes:
        self.touched = True
        while self.more and (size is None or size < 0 or len(self.buffer) < size):
            self._fill()
        if size is None or size < 0:
            size = len(self.buffer)
        data = bytes(self.buffer[:size])
        del self.buffer[:size]
        return data

    def readline(self, size: int | None = -1) -> bytes:
        self.touched = True
        while (
            self.more and b"\n" not in self.buffer and (size is None or size < 0 or len(self.buffer) < size)
        ):
            self._fill()
        end = self.buffer.find(b"\n") + 1 or len(self.buffer)
        if size is not None and size >= 0:
            end = min(end, size)
        data = bytes(self.buffer[:end])
        del self.buffer[:end]
        return data

    async def app_receive(self) -> Message:
        """The app's ``receive``: what the middleware read and left, then the server's own."""
        if self.touched and not self.handed_end:
            body = bytes(self.buffer)
            self.buffer.clear()
            self.handed_end = not self.more
            return {"type": "http.request", "body": body, "more_body": self.more}
        return await self.receive()


def _is_header(key: str) -> bool:
    """Whether the environ key *key* holds a request header (PEP 3333)."""
    return key[:5] == "HTTP_" or key == "CONTENT_LENGTH" or key == "CONTENT_TYPE"


class Environ(dict[str, Any]):
    """The request's environ and scope in one dict; remembers the request headers rewritten in it."""

    __slots__ = ("changed",)

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        #: CGI key -> new value (None: removed), since the scope's headers were last in step
        self.changed: dict[str, Any] = {}

    def __setitem__(self, key: str, value: Any) -> None:
        if _is_header(key) and self.get(key) != value:
            self.changed[key] = value
        super().__setitem__(key, value)

    def pop(self, key: str, *default: Any) -> Any:
        if key in self and _is_header(key):
            self.changed[key] = None
        return super().pop(key, *default)

    def __delitem__(self, key: str) -> None:
        self.pop(key)


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


def _headers_environ(raw: Iterable[tuple[bytes, bytes]]) -> dict[str, str]:
    found: dict[str, str] = {}
    for name, value in raw:
        key = _header_key(name)
        text = value.decode("latin-1")
        if key in found:  # repeated lines are joined, as WSGI servers join them
            text = found[key] + ("; " if key == "HTTP_COOKIE" else ",") + text
        found[key] = text
    return found


def environ_for(scope: Scope, receive: Receive) -> WSGIEnvironment:
    """The request's environ: *scope* (an outer apimw ASGI middleware's) or a copy with CGI keys."""
    if isinstance(scope, Environ):
        # an outer apimw middleware's, reached through other middlewares: the body comes
        # through the receive they hand on (they may transform it)
        scope["wsgi.input"] = Input(receive)
        scope[_ENVIRON_RECEIVE] = receive
        return scope
    environ = Environ(scope)
    path = scope.get("path", "/")
    root = scope.get("root_path", "")
    if root and path.startswith(root):
        path = path[len(root) :]
    server = scope.get("server") or ("localhost", None)
    client = scope.get("client")
    headers = _headers_environ(scope.get("headers", ()))
    environ.update(headers)
    environ.update({
        _ENVIRON_RECEIVE: receive,
        "REQUEST_METHOD": scope["method"],
        # PEP 3333: the path's bytes as latin-1 (ASGI gives them decoded as UTF-8)
        "SCRIPT_NAME": root.encode("utf-8").decode("latin-1"),
        "PATH_INFO": path.encode("utf-8").decode("latin-1"),
        "QUERY_STRING": scope.get("query_string", b"").decode("latin-1"),
        "SERVER_NAME": str(server[0]),
        "SERVER_PORT": str(server[1] or (443 if scope.get("scheme") == "https" else 80)),
        "SERVER_PROTOCOL": "HTTP/" + scope.get("http_version", "1.1"),
        "REMOTE_ADDR": client[0] if client else "",
        "wsgi.version": (1, 0),
        "wsgi.url_scheme": scope.get("scheme", "http"),
        "wsgi.input": Input(receive),
        "wsgi.errors": sys.stderr,
        "wsgi.multithread": True,
        "wsgi.multiprocess": False,
        "wsgi.run_once": False,
        # ASGI bodies are framed: reading to the end is reading the body
        "wsgi.input_terminated": True,
    })  # fmt: skip
    return environ


def _sync_headers(environ: Environ) -> None:
    """Rewrite the scope's ``headers`` with the request headers a middleware changed in the environ."""
    changed = environ.changed
    kept = [(name, value) for name, value in environ["headers"] if _header_key(name) not in changed]
    for key, value in changed.items():
        if value is not None:
            name = key[5:] if key.startswith("HTTP_") else key
            kept.append((name.lower().replace("_", "-").encode("latin-1"), str(value).encode("latin-1")))
    environ["headers"] = kept
    environ.changed = {}


# -- the app below a WSGI middleware ---------------------------------------------------------


class _Collect:
    """The app's ``send``: keeps the messages of its answer."""

    __slots__ = ("messages",)

    def __init__(self) -> None:
        self.messages: list[Message] = []

    async def __call__(self, message: Message) -> None:
        self.messages.append(message)


class CallASGI:
    """The WSGI app a WSGI middleware wraps, standing for the ASGI *app* (awaited on the loop)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    def __call__(self, environ: WSGIEnvironment, start_response: StartResponse) -> Iterable[bytes]:
        if isinstance(environ, Environ) and environ.changed:
            _sync_headers(environ)
        stream = environ["wsgi.input"]
        if isinstance(stream, Input):
            receive: Receive = stream.app_receive
        else:  # the middleware buffered the body (idempotency): the app gets those bytes
            buffered = stream.read()
            environ["wsgi.input"] = io.BytesIO(buffered)  # for an inner apimw middleware
            receive = _Replay(buffered, environ[_ENVIRON_RECEIVE]).receive
        collect = _Collect()
        await_only(self.app(environ, receive, collect))
        start = None
        body: list[bytes] = []
        for message in collect.messages:
            kind = message["type"]
            if kind == "http.response.start":
                start = message
            elif kind == "http.response.body":
                chunk = message.get("body", b"")
                if chunk:
                    body.append(bytes(chunk))
        if start is None:
            raise RuntimeError("the ASGI app returned without sending http.response.start")
        status = int(start["status"])
        headers = [(k.decode("latin-1"), v.decode("latin-1")) for k, v in start.get("headers", ())]
        start_response(_REASONS.get(status) or f"{status} Unknown", headers)
        return body


class _Replay:
    """``receive`` over a body the middleware already read, then the server's (disconnect)."""

    def __init__(self, body: bytes, receive: Receive) -> None:
        self.body: bytes | None = body
        self.server_receive = receive

    async def receive(self) -> Message:
        body, self.body = self.body, None
        if body is None:
            return await self.server_receive()
        return {"type": "http.request", "body": body, "more_body": False}


# -- the response: WSGI -> ASGI --------------------------------------------------------------


def _run_wsgi(
    middleware: WSGIApplication, environ: WSGIEnvironment
) -> tuple[int, list[tuple[bytes, bytes]], bytes]:
    started: list[Any] = []
    written: list[bytes] = []

    def start_response(
        status: str, headers: list[tuple[str, str]], exc_info: Any = None
    ) -> Callable[[bytes], object]:
        if exc_info is not None:
            exc_info = None  # nothing was sent yet: the new answer replaces the started one
        elif started:
            raise RuntimeError("start_response called a second time without exc_info (PEP 3333)")
        started[:] = [status, headers]
        return written.append

    result = middleware(environ, start_response)
    try:
        for chunk in result:
            if chunk:
                written.append(chunk)
    finally:
        close = getattr(result, "close", None)
        if close is not None:
            close()
    if not started:
        raise RuntimeError("the middleware returned without calling start_response")
    status, headers = started
    raw = [(k.encode("latin-1"), v.encode("latin-1")) for k, v in headers]
    return int(status[:3]), raw, b"".join(written)


async def serve(
    middleware: WSGIApplication, app: ASGIApp, scope: Scope, receive: Receive, send: Send
) -> None:
    """Answer one ASGI request with *middleware* (the WSGI twin over :class:`CallASGI` of *app*)."""
    if scope["type"] != "http":
        await app(scope, receive, send)
        return
    environ = environ_for(scope, receive)
    status, headers, body = await run_sync(_run_wsgi, middleware, environ)
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body, "more_body": False})
