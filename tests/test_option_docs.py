"""Every option of the three middlewares is documented in its class's docstring, on both doors:
``help()`` (and the generated reference) shows each one, and the required ones say so."""

from __future__ import annotations

import pydoc
import re
from typing import Any

import pytest

import apimw.asgi
from apimw import etag, idempotency, microversion

MIDDLEWARES = [
    pytest.param(microversion.OPTIONS, microversion.MicroversionMiddleware, id="microversion-wsgi"),
    pytest.param(microversion.OPTIONS, apimw.asgi.MicroversionMiddleware, id="microversion-asgi"),
    pytest.param(etag.OPTIONS, etag.ETagMiddleware, id="etag-wsgi"),
    pytest.param(etag.OPTIONS, apimw.asgi.ETagMiddleware, id="etag-asgi"),
    pytest.param(idempotency.OPTIONS, idempotency.IdempotencyMiddleware, id="idempotency-wsgi"),
    pytest.param(idempotency.OPTIONS, apimw.asgi.IdempotencyMiddleware, id="idempotency-asgi"),
]

#: the line that starts an option's entry: ````name`` (required)`` or ````name`` (default ...)``
_ENTRY = re.compile(r"^ {4}``(?P<name>\w+)`` \((?:required|default .*)\)$")


def documented(cls: type) -> dict[str, str]:
    """The options *cls*'s docstring documents, each with the line that starts its entry."""
    entries: dict[str, str] = {}
    for line in (cls.__doc__ or "").splitlines():
        found = _ENTRY.match(line)
        if found is None:
            continue
        entries[found["name"]] = line.strip()
    return entries


@pytest.mark.parametrize(("options", "cls"), MIDDLEWARES)
def test_help_shows_every_option(options: Any, cls: type) -> None:
    entries = documented(cls)
    assert sorted(entries.keys() & {opt.name for opt in options}) == sorted(opt.name for opt in options)
    shown = pydoc.render_doc(cls, renderer=pydoc.plaintext)
    for line in entries.values():
        assert line in shown


@pytest.mark.parametrize(("options", "cls"), MIDDLEWARES)
def test_the_required_options_are_marked(options: Any, cls: type) -> None:
    entries = documented(cls)
    for opt in options:
        assert ("(required)" in entries[opt.name]) == opt.required, entries[opt.name]


@pytest.mark.parametrize(("options", "cls"), MIDDLEWARES)
def test_help_shows_each_options_help_text(options: Any, cls: type) -> None:
    # the same words oslo-config-generator writes into a sample configuration file
    rendered = pydoc.render_doc(cls, renderer=pydoc.plaintext)
    # pydoc draws a class's text with a " |  " margin: the words are read without it
    shown = " ".join(word for line in rendered.splitlines() for word in line.lstrip(" |").split())
    for opt in options:
        assert " ".join(opt.help.split()) in shown, opt.name
