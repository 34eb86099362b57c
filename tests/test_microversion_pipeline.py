"""Finding a microversion middleware below an inner apimw middleware, when the pipeline is built.

An apimw middleware that reads the served version (etag's ``min_version``) placed outside the
microversion middleware never sees one; :func:`apimw.microversion.wraps_microversion` lets it
refuse that order at load time, through the middlewares between (oslo.middleware's keep their
app as ``application``) and on both doors.
"""

from __future__ import annotations

from typing import Any

from oslo_middleware.request_id import RequestId

import apimw.asgi
from apimw.microversion import MicroversionMiddleware, wraps_microversion

OPTIONS: dict[str, Any] = {"service_type": "baremetal", "min_version": "1.1", "max_version": "1.2"}


def app(environ: dict[str, Any], start_response: Any) -> list[bytes]:
    start_response("200 OK", [])
    return [b""]


async def asgi_app(scope: Any, receive: Any, send: Any) -> None:
    raise AssertionError("never called")


def test_a_microversion_middleware_right_below_is_found() -> None:
    assert wraps_microversion(MicroversionMiddleware(app, **OPTIONS))
    assert wraps_microversion(apimw.asgi.MicroversionMiddleware(asgi_app, **OPTIONS))


def test_one_below_an_oslo_middleware_is_found() -> None:
    # paste: "pipeline = etag request_id microversion app" builds etag over request_id over this
    assert wraps_microversion(RequestId(MicroversionMiddleware(app, **OPTIONS)))


def test_a_pipeline_without_one_or_with_one_outside_has_none_below() -> None:
    assert not wraps_microversion(app)
    assert not wraps_microversion(RequestId(app))
    assert not wraps_microversion(asgi_app)


def test_a_cycle_ends() -> None:
    class Loop:
        def __init__(self) -> None:
            self.app = self

    assert not wraps_microversion(Loop())


def test_help_shows_every_option_and_marks_the_required_ones() -> None:
    import pydoc

    from apimw.microversion import OPTIONS

    text = pydoc.render_doc(MicroversionMiddleware, renderer=pydoc.plaintext)
    for option in OPTIONS:
        assert option.name in text, option.name
    for name in ("service_type", "min_version, max_version"):
        assert f"{name} (required)" in text
