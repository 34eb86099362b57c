"""The request body of a protected request: buffered (capped) for the fingerprint, then given back.

A body declared by ``Content-Length`` is read to its length; a chunked one (or one the
server marks ``wsgi.input_terminated``) is read to its end, at most ``max_request_bytes``.
The app then reads the same bytes from a fresh ``wsgi.input`` with an exact
``Content-Length``.
"""

from __future__ import annotations

import io
from typing import TYPE_CHECKING, Any, Final

from apimw.errors import HTTPProblem

if TYPE_CHECKING:
    from _typeshed.wsgi import WSGIEnvironment

_READ_CHUNK: Final = 65536


class _UnreadableBody(Exception):
    """The server's ``wsgi.input`` failed while the body was read."""


def _read(stream: Any, size: int) -> bytes:
    """``stream.read(size)``; any failure of the server's input stream is :class:`_UnreadableBody`.

    What a server raises there is its own: an ``OSError`` when the client goes away
    mid-body, gunicorn's ``ParseException`` subclasses (``InvalidChunkSize``,
    ``ChunkMissingTerminator``; not ``OSError``) for a malformed chunked body,
    werkzeug's ``ClientDisconnected``.  All of them mean the same to the client: 400.
    """
    try:
        data = stream.read(size)
    except Exception as exc:
        raise _UnreadableBody(type(exc).__name__) from exc
    return bytes(data)


def read_body(environ: WSGIEnvironment, max_request: int) -> bytes | HTTPProblem:
    """Buffer the request body (at most *max_request* bytes), then hand the app an equivalent
    input; the 400 or 413 to answer when the body is malformed, incomplete or too large."""
    try:
        return _read_body(environ, max_request)
    except _UnreadableBody:
        return HTTPProblem(400, "idempotency.body-incomplete",
                           "The request body could not be read completely.")  # fmt: skip


def _read_body(environ: WSGIEnvironment, max_request: int) -> bytes | HTTPProblem:
    length_text = environ.get("CONTENT_LENGTH") or ""
    chunked = "chunked" in environ.get("HTTP_TRANSFER_ENCODING", "").lower()
    stream = environ.get("wsgi.input")
    if length_text and not chunked:
        if not length_text.isdigit() or not length_text.isascii():
            return HTTPProblem(400, "idempotency.content-length-invalid",
                               "Content-Length is not a number.")  # fmt: skip
        length = int(length_text)
        if length > max_request:
            return _too_large(max_request)
        body = _read(stream, length) if stream is not None and length else b""
        if len(body) != length:
            return HTTPProblem(400, "idempotency.body-incomplete",
                               f"Content-Length is {length} but {len(body)} bytes arrived.")  # fmt: skip
    elif stream is not None and (chunked or environ.get("wsgi.input_terminated")):
        pieces: list[bytes] = []
        size = 0
        while True:
            piece = _read(stream, _READ_CHUNK)
            if not piece:
                break
            size += len(piece)
            if size > max_request:
                return _too_large(max_request)
            pieces.append(piece)
        body = b"".join(pieces)
    else:
        body = b""
    environ["wsgi.input"] = io.BytesIO(body)
    environ["CONTENT_LENGTH"] = str(len(body))
    environ.pop("HTTP_TRANSFER_ENCODING", None)
    return body


def _too_large(max_request: int) -> HTTPProblem:
    return HTTPProblem(
        413, "idempotency.body-too-large",
        f"A request with X-Client-Token may carry at most {max_request} bytes.",
    )  # fmt: skip
