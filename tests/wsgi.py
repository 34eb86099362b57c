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
