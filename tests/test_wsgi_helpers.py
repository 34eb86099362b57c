"""apimw._wsgi: the start_response a middleware hands its app, and close() exactly once."""

from __future__ import annotations

import sys
from typing import Any

from apimw._wsgi import ClosingIterable, StartResponse
from tests.wsgiref_run import run_under_wsgiref


def server_start_response(calls: list[Any]) -> Any:
    def start_response(status: str, headers: list[tuple[str, str]], exc_info: Any = None) -> Any:
        calls.append((status, headers, exc_info))
        return lambda data: None

    return start_response


def test_the_first_call_goes_without_exc_info_and_adds_the_edit() -> None:
    calls: list[Any] = []
    start = StartResponse(server_start_response(calls), lambda headers: [*headers, ("X-Ours", "1")])
    assert start.exc_info() is None
    try:
        raise RuntimeError("handled by the app")
    except RuntimeError:
        start("500 Internal Server Error", [], sys.exc_info())
        assert start.exc_info() is not None and start.exc_info()[0] is RuntimeError  # type: ignore[index]
    assert calls == [("500 Internal Server Error", [("X-Ours", "1")], None)]


def test_a_later_call_passes_exc_info_and_a_real_server_re_raises_once_sent() -> None:
    def app(environ: dict[str, Any], start_response: Any) -> list[bytes]:
        start = StartResponse(start_response)
        write = start("200 OK", [("Content-Type", "text/plain")])
        write(b"sent")
        try:
            raise ValueError("after the headers")
        except ValueError:
            start("500 Internal Server Error", [("Content-Type", "text/plain")], sys.exc_info())
        return [b"error page"]

    wire, caught = run_under_wsgiref(app)
    assert caught is not None and caught[0] is ValueError
    assert wire.endswith(b"\r\n\r\nsent")


def test_closing_iterable_closes_the_source_exactly_once() -> None:
    closed: list[int] = []

    class Source:
        def __iter__(self) -> Any:
            return iter([b"b", b"c"])

        def close(self) -> None:
            closed.append(1)

    source = Source()
    body = ClosingIterable([b"a"], iter(source), source)
    assert b"".join(body) == b"abc"
    body.close()
    body.close()
    assert closed == [1]
