"""Drive a WSGI app in memory like a server would: collect, then close() exactly once."""

from __future__ import annotations

from typing import Any
from wsgiref.validate import validator

from webob import Request, Response


def run(app: Any, req: Request, *, validate: bool = True) -> Response:
    """Call *app* (wrapped in wsgiref's PEP 3333 validator) and return a webob Response."""
    captured: dict[str, Any] = {}
    written: list[bytes] = []

    def start_response(status: str, headers: list[tuple[str, str]], exc_info: Any = None) -> Any:
        if exc_info is not None and captured:
            raise exc_info[1].with_traceback(exc_info[2])
        captured["status"], captured["headers"] = status, headers
        return written.append

    environ = req.environ
    if validate:
        # the validator wraps wsgi.input in a non-seekable reader: don't let webob think otherwise
        environ = {k: v for k, v in environ.items() if k != "webob.is_body_seekable"}
    result = (validator(app) if validate else app)(environ, start_response)
    try:
        body = b"".join([*written, *result])
    finally:
        close = getattr(result, "close", None)
        if close is not None:
            close()
    if req.method == "HEAD":
        assert body == b"", "a HEAD response must have no body"
        # webob would recompute Content-Length from the empty body; keep the wire headers
        return Response(status=captured["status"], headerlist=list(captured["headers"]), app_iter=[])
    resp = Response(status=captured["status"], headerlist=list(captured["headers"]))
    resp.body = body
    return resp


class LoopbackWaitress:
    """waitress serving *app* on an ephemeral loopback port, in a daemon thread, stopped cleanly.

    ``server.run()`` loops until its socket map is empty, and ``server.close()`` from another
    thread only takes the listener out of the map: client channels stay open and the loop
    runs on. Here the loop runs in short passes until :meth:`stop`, and the loop's own
    thread closes the listener and every channel (closing from another thread while
    ``poll()`` runs races), so no accepted socket outlives the server.
    """

    def __init__(self, app: Any, *, name: str = "waitress", **options: Any) -> None:
        import threading

        from waitress.server import create_server

        self.server: Any = create_server(app, host="127.0.0.1", port=0, **options)
        self.port: int = self.server.effective_port
        self.url = f"http://127.0.0.1:{self.port}"
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, name=name, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        server = self.server
        try:
            while not self._stop.is_set():
                server.asyncore.loop(timeout=0.05, map=server._map, use_poll=True, count=1)
        finally:
            server.asyncore.close_all(server._map)
            server.task_dispatcher.shutdown()

    def stop(self, timeout: float = 10) -> None:
        self._stop.set()
        self._thread.join(timeout=timeout)
        assert not self._thread.is_alive(), "waitress did not stop"
