"""Which etag a response carries, sans-IO: the app's etag checked, the ETag header, the body field.

Plain values in and out (header lists, bytes), shared by every middleware that sends ETags.
"""

from __future__ import annotations

import json
import re
from typing import Final

from apimw.errors import ApimwError

ETAG_HEADER: Final = "ETag"


def header_value(headers: list[tuple[str, str]], name: str) -> str | None:
    """The value of the first *name* header (case-insensitive), or ``None``."""
    lowered = name.lower()
    for key, value in headers:
        if key.lower() == lowered:
            return value
    return None


#: A wire-form entity-tag (RFC 9110 §8.8.3), weak or strong.
VALID_WIRE_ETAG: Final = re.compile(r'(W/)?"[\x21\x23-\x7e\x80-\xff]*"')


def check_wire(etag: str) -> str:
    # Cheap checks on the hot path (no regex): quoted, one pair of quotes, no CR/LF/controls.
    if (
        etag[-1:] == '"'
        and (etag[:3] == 'W/"' or etag[:1] == '"')
        and etag.count('"') == 2
        and etag.isprintable()
        and " " not in etag
    ):
        return etag
    raise ApimwError(f"the app supplied an invalid etag {etag!r}; build it with format_etag()")


def with_etag(headers: list[tuple[str, str]], etag: str, *, replace: bool = True) -> list[tuple[str, str]]:
    """*headers* with ``ETag: etag``, replacing one the app set (*replace*: it set one)."""
    if not etag.isprintable():  # never a CR/LF into the response head
        check_wire(etag)
    if replace:
        return [*(h for h in headers if h[0].lower() != "etag"), (ETAG_HEADER, etag)]
    return [*headers, (ETAG_HEADER, etag)]


def etag_and_type(headers: list[tuple[str, str]]) -> tuple[str | None, str]:
    """The value of the app's first ``ETag`` header (``None``: it set none) and of its
    ``Content-Type`` (``""``: none), in one pass over its headers."""
    etag: str | None = None
    ctype = ""
    for name, value in headers:
        lowered = name.lower()
        if lowered == "etag":
            if etag is None:
                etag = value
        elif lowered == "content-type":
            ctype = value
    return etag, ctype


def is_json_document(ctype: str) -> bool:
    """Whether the media type *ctype* is one JSON document: ``application/json`` or a ``+json``
    type (RFC 6839), parameters aside.  Streams of JSON texts (``application/x-ndjson``,
    ``application/json-seq``) are not: they have no top-level ``etag`` and may never end."""
    media = ctype.partition(";")[0].strip().lower()
    return media == "application/json" or (media.startswith("application/") and media.endswith("+json"))


def etag_in_body(body: bytes) -> str | None:
    """The top-level ``etag`` string of a JSON object body (a list's items are not the resource)."""
    # A UTF-8 object starts with "{" (0x7B; json.loads reads UTF-16/32 too, which it tells by a
    # BOM or a NUL in the first two bytes).  Such a body is parsed only when it can hold an
    # "etag" key, written either as the bytes "etag" or with a \u escape, and it is decoded
    # here, as json.loads would decode it once it told the encoding.
    # (bytes.find, not ``in``: ``in`` first tries the needle as an int and raises and clears a
    # TypeError for every bytes needle, which costs twice the search on a short body.)
    if len(body) < 2:
        return None  # no JSON object is shorter than "{}" (a HEAD answer's empty body, say)
    utf8 = body[0] == 0x7B and body[1] != 0
    if utf8 and body.find(b'"etag"') < 0 and body.find(b"\\u") < 0:
        return None
    try:
        doc = json.loads(body.decode("utf-8", "surrogatepass") if utf8 else body)
    except (ValueError, RecursionError):
        # not JSON (not UTF-8 either), or nested deeper than the parser's recursion limit (an
        # answer of any depth is the app's to send; it just names no etag we can read)
        return None
    if isinstance(doc, dict):
        value = doc.get("etag")
        if isinstance(value, str) and VALID_WIRE_ETAG.fullmatch(value):
            return value
    return None
