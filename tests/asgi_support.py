"""The behaviour tests of the three middlewares, run against their ASGI twins too.

A test builds its stack with :func:`layered` (WSGI middlewares outermost first over a
WSGI test app) and drives it with its usual WSGI driver.  Under the ``asgi`` flavour
:func:`layered` builds the :mod:`apimw.asgi` middlewares over the test app run as an
ASGI app, and wraps the stack in :class:`DriveASGI`: a WSGI callable that turns the
test's environ into an ASGI request (scope, body messages) on one event loop shared by
every test, and the ASGI answer back into ``start_response`` and a body.  Requests from
several threads become concurrent tasks on that loop.

Modules opt in with ``pytest_generate_tests = flavours("fixture")`` and their builders
take the ``flavour``; tests marked ``wsgi_only`` (PEP 3333 mechanics: ``write()``,
``exc_info``, ``close()``, ``wsgi.file_wrapper``, a store object swapped in) run once.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import io
import threading
from collections.abc import Callable, Iterable
from typing import Any

import pytest

import apimw.asgi
from apimw.asgi._glue import add_request_keys, header_environ
from apimw.etag import ETagMiddleware
from apimw.idempotency import IdempotencyMiddleware
from apimw.microversion import MicroversionMiddleware

FLAVOURS = ("wsgi", "asgi")
TWINS: dict[type, Any] = {
    MicroversionMiddleware: apimw.asgi.MicroversionMiddleware,
    ETagMiddleware: apimw.asgi.ETagMiddleware,
    IdempotencyMiddleware: apimw.asgi.IdempotencyMiddleware,
}

_loop: asyncio.AbstractEventLoop | None = None
_loop_lock = threading.Lock()
#: the WSGI test apps run here (they sleep, block, count): 64 at a time, as a threaded server would
_APP_THREADS = concurrent.futures.ThreadPoolExecutor(64, thread_name_prefix="asgi-test-app")


def loop() -> asyncio.AbstractEventLoop:
    """The event loop every ASGI request of the tests runs on (a daemon thread)."""
    global _loop
    with _loop_lock:
        if _loop is None:
            _loop = asyncio.new_event_loop()
            threading.Thread(target=_loop.run_forever, name="asgi-test-loop", daemon=True).start()
        return _loop


def run_async(coroutine: Any, timeout: float = 60) -> Any:
    return asyncio.run_coroutine_threadsafe(coroutine, loop()).result(timeout)


def flavours(fixture_name: str = "flavour") -> Callable[[pytest.Metafunc], None]:
    """A ``pytest_generate_tests`` that runs each test for both flavours (``wsgi_only``: WSGI)."""

    def generate(metafunc: pytest.Metafunc) -> None:
        if fixture_name in metafunc.fixturenames:
            only_wsgi = metafunc.definition.get_closest_marker("wsgi_only") is not None
            metafunc.parametrize(fixture_name, ["wsgi"] if only_wsgi else list(FLAVOURS))

    return generate


def module_flavour() -> Any:
    """An autouse fixture that sets the test module's ``FLAVOUR`` to the test's flavour, for
    modules whose helpers build the stack without taking the fixture:
    ``_flavour = module_flavour()``."""

    @pytest.fixture(autouse=True)
    def _flavour(flavour: str, request: pytest.FixtureRequest) -> None:
        request.module.FLAVOUR = flavour

    return _flavour


def as_asgi(app: Callable[..., Iterable[bytes]]) -> Any:
    """The WSGI test *app* as an ASGI app: its environ is the request's scope with its CGI keys
    (what the middlewares left in the scope, the headers as they forwarded them), its body the
    one the ASGI request carries; it runs in a worker thread.  What it sets in its environ
    (``mark_enforced``...) is set in the scope."""

    async def asgi_app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        chunks = []
        while True:
            message = await receive()
            if message["type"] != "http.request":
                break
            chunks.append(message.get("body", b""))
            if not message.get("more_body"):
                break
        environ = {**scope, **header_environ(scope.get("headers", ()))}
        environ["wsgi.input"] = io.BytesIO(b"".join(chunks))
        add_request_keys(scope, environ)
        try:
            status, headers, body = await asyncio.get_running_loop().run_in_executor(
                _APP_THREADS, _run_wsgi, app, environ
            )
        finally:
            set_by_app = {k: v for k, v in environ.items() if "." in k and k[:5] != "wsgi."}
            scope.update({k: v for k, v in set_by_app.items() if scope.get(k) is not v})
        await send({"type": "http.response.start", "status": status,
                    "headers": [(k.encode("latin-1"), v.encode("latin-1")) for k, v in headers]})  # fmt: skip
        await send({"type": "http.response.body", "body": body})

    return asgi_app


def _run_wsgi(app: Any, environ: dict[str, Any]) -> tuple[int, list[tuple[str, str]], bytes]:
    got: list[Any] = []
    written: list[bytes] = []

    def start_response(status: str, headers: list[tuple[str, str]], exc_info: Any = None) -> Any:
        got[:] = [status, headers]
        return written.append

    result = app(environ, start_response)
    try:
        written.extend(result)
    finally:
        close = getattr(result, "close", None)
        if close is not None:
            close()
    return int(got[0][:3]), list(got[1]), b"".join(written)


def _scope(environ: dict[str, Any]) -> tuple[dict[str, Any], bytes | None]:
    """The ASGI scope and body of the request a test's WSGI environ describes (None: a disconnect)."""
    headers = []
    for key, value in environ.items():
        if key.startswith("HTTP_"):
            name = key[5:]
        elif key in ("CONTENT_TYPE", "CONTENT_LENGTH") and value:
            name = key
        else:
            continue
        text = str(value)
        raw = text.encode("latin-1") if text.isascii() or max(text) <= "\xff" else text.encode("utf-8")
        headers.append((name.lower().replace("_", "-").encode("latin-1"), raw))
    stream = environ.get("wsgi.input")
    length = environ.get("CONTENT_LENGTH") or ""
    chunked = "chunked" in environ.get("HTTP_TRANSFER_ENCODING", "").lower()
    body: bytes | None
    try:
        if stream is None:
            body = b""
        elif length.isdigit() and not chunked:
            body = stream.read(int(length))
        elif chunked or environ.get("wsgi.input_terminated"):
            body = b"".join(iter(lambda: stream.read(65536), b""))
        else:
            body = b""
    except OSError:  # the client went away mid-body: ASGI says http.disconnect
        body = None
    root = environ.get("SCRIPT_NAME", "")
    scope: dict[str, Any] = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": environ.get("SERVER_PROTOCOL", "HTTP/1.1").partition("/")[2] or "1.1",
        "method": environ["REQUEST_METHOD"],
        "scheme": environ.get("wsgi.url_scheme", "http"),
        "root_path": root.encode("latin-1").decode("utf-8"),
        "path": (root + environ.get("PATH_INFO", "")).encode("latin-1").decode("utf-8"),
        "query_string": environ.get("QUERY_STRING", "").encode("latin-1"),
        "headers": headers,
        "server": (environ.get("SERVER_NAME", "localhost"), int(environ.get("SERVER_PORT") or 80)),
        "client": ("127.0.0.1", 40000),
    }
    # what outer WSGI middlewares left for the stack (a request id, a served version) is in the scope
    scope.update({k: v for k, v in environ.items() if "." in k and not k.startswith(("wsgi.", "webob."))})
    return scope, body


class DriveASGI:
    """A WSGI callable driving the ASGI *app* (see the module docstring)."""

    def __init__(self, app: Any) -> None:
        self.app = app

    def __getattr__(self, name: str) -> Any:
        return getattr(self.app, name)

    @property
    def store(self) -> Any:
        """The ASGI idempotency middleware's asyncio store, called from the test's thread."""
        return blocking(self.app.store)

    def close(self) -> None:
        aclose = getattr(self.app, "aclose", None)
        if aclose is not None:
            run_async(aclose())

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> list[bytes]:
        scope, body = _scope(environ)
        status, headers, out, seen = run_async(self._request(scope, body))
        # what the middlewares left in the request's environ, as a WSGI server's caller sees it
        environ.update({k: v for k, v in seen.items() if k.startswith("apimw.") and "asgi" not in k})
        start_response(f"{status} {_reason(status)}", headers)
        return [out] if out else []

    async def _request(self, scope: dict[str, Any], body: bytes | None) -> Any:
        messages: list[dict[str, Any]] = [
            {"type": "http.disconnect"}
            if body is None
            else {"type": "http.request", "body": body, "more_body": False}
        ]
        disconnected = asyncio.Event()

        async def receive() -> dict[str, Any]:
            if messages:
                return messages.pop(0)
            await disconnected.wait()
            return {"type": "http.disconnect"}

        sent: list[dict[str, Any]] = []

        async def send(message: dict[str, Any]) -> None:
            sent.append(message)

        try:
            await self.app(scope, receive, send)  # the middlewares leave their keys in it
        finally:
            disconnected.set()
        start = next(m for m in sent if m["type"] == "http.response.start")
        out = b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")
        headers = [(k.decode("latin-1"), v.decode("latin-1")) for k, v in start["headers"]]
        return start["status"], headers, out, scope


def blocking(store: Any) -> Any:
    """An asyncio store's methods as blocking calls (run on the shared loop)."""
    return _Blocking(store)


class _Blocking:
    """An asyncio store's methods as blocking calls (run on the shared loop)."""

    def __init__(self, store: Any) -> None:
        self.aio = store
        self.name = store.name

    def __getattr__(self, name: str) -> Any:
        method = getattr(self.aio, name)

        def blocking(*args: Any) -> Any:
            return run_async(method(*args))

        return blocking


def _reason(status: int) -> str:
    from http import HTTPStatus

    try:
        return HTTPStatus(status).phrase
    except ValueError:
        return "Unknown"


def layered(flavour: str, app: Any, *layers: tuple[type, dict[str, Any]]) -> Any:
    """*layers* ``(WSGI middleware class, options)``, outermost first, over the WSGI test *app*:
    the WSGI stack, or under ``asgi`` their ASGI twins over *app* as an ASGI app, driven as WSGI."""
    if flavour == "wsgi":
        stack = app
        for cls, options in reversed(layers):
            stack = cls(stack, **options)
        return stack
    stack = as_asgi(app)
    for cls, options in reversed(layers):
        stack = TWINS[cls](stack, **options)
    return DriveASGI(stack)
