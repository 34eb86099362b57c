"""Run a WSGI app once under wsgiref's own server handler (PEP 3333 as a real server does it)."""

from __future__ import annotations

import io
from typing import Any
from wsgiref.handlers import SimpleHandler

from webob import Request


class _Handler(SimpleHandler):
    os_environ: dict[str, str] = {}  # noqa: RUF012 - only the request's own environ
    errors: Any = None

    def log_exception(self, exc_info: Any) -> None:  # keep what the server caught
        self.errors = exc_info


def run_under_wsgiref(app: Any, path: str = "/") -> tuple[bytes, Any]:
    """The bytes the server wrote for one ``GET path``, and the exception it caught (or ``None``)."""
    environ = {k: v for k, v in Request.blank(path).environ.items() if not k.startswith("webob.")}
    out = io.BytesIO()
    handler = _Handler(
        environ["wsgi.input"], out, io.StringIO(), environ, multithread=False, multiprocess=False
    )
    handler.run(app)
    return out.getvalue(), handler.errors
