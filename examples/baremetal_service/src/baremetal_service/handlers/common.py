"""Plumbing shared by every controller: versions, JSON bodies, links, fields, paging, errors."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final
from urllib.parse import quote as url_quote
from urllib.parse import urlencode

import fastjsonschema
import jsonschema
import orjson
from flask import Request, Response, current_app, request
from werkzeug.exceptions import HTTPException

from apimw import Version
from apimw.discovery import request_base_url
from apimw.errors import ENVIRON_PROFILE, HTTPProblem, render_problem
from apimw.microversion import require_version, served_version
from baremetal_service import schemas, versions
from baremetal_service.handlers.json_schema import Validator, ecma_schema

MAX_LIMIT: Final = 1000
#: Largest list page, in bytes of its items' JSON: a page stops before the item that would
#: pass it (and has a ``next`` link), so one answer, and the memory it takes, stays bounded
#: whatever the items hold.  ``app.config[PAGE_BYTES_KEY]`` overrides it per app.
MAX_PAGE_BYTES: Final = 4 * 1024 * 1024
#: Rows read at once while a list page is made (the first read of a page whose items may be
#: large; later reads are sized from the bytes per item seen so far).
PAGE_CHUNK_ROWS: Final = 25
#: Longest integer query parameter accepted (``?limit=``): ASCII digits only, at most this many.
MAX_INTEGER_DIGITS: Final = 9

#: Largest request body the API reads (bytes); a bigger one is a 413 before it is read
#: (checked against Content-Length first, and while reading a chunked body).
#: ``create_flask_app(service, max_body_bytes=...)`` overrides it per app.
MAX_BODY_BYTES: Final = 1024 * 1024
#: The numbers a request body may hold, integers and floats alike: the 64-bit range the
#: response encoder (orjson) writes, from the smallest signed to the largest unsigned 64-bit
#: integer.  Floats are held to it too, as an integral float is stored as the integer it
#: says (``1e20`` is stored as ``100000000000000000000``).
MIN_JSON_NUMBER: Final = -(2**63)
MAX_JSON_NUMBER: Final = 2**64 - 1
#: Deepest nesting of arrays/objects accepted in a JSON body or stored in a resource
#: (counted from the document itself = 1).  Checked iteratively, before anything recursive.
MAX_JSON_DEPTH: Final = 32
#: Largest serialized size (UTF-8 bytes of compact JSON) of each free-form JSON field
#: (``extra``, ``properties``, ``driver_info``, ``instance_info``...).
MAX_JSON_FIELD_BYTES: Final = 64 * 1024
#: Longest quotation of client input in an error message (longer values are cut, with "...").
MAX_QUOTED_CHARS: Final = 100
#: Longest error ``detail`` (a last resort: every quotation is already cut).
MAX_DETAIL_CHARS: Final = 2048
UUID_RE: Final = re.compile(
    r"^[0-9a-fA-F]{8}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{12}\Z"
)

_JSON_HEADERS: Final = (("Content-Type", "application/json"),)


# -- version ------------------------------------------------------------------------------------


def api_version() -> Version:
    """The version this request is served at (the minimum when no middleware negotiated one)."""
    return served_version(request.environ) or versions.MIN_VERSION


#: Ironic's words for a 406 of a field, parameter or verb newer than the served version
#: (the library's gate, :func:`apimw.microversion.require_version`, with this message).
IRONIC_406: Final = (
    "Request not acceptable. {what} requires API version {required} or later; "
    "the request was served at {served}."
)


def require(what: str, needed: Version) -> None:
    """Ironic's 406 (code ``microversion.feature-unavailable``) unless served at *needed* or later."""
    require_version(request.environ, needed, what=what, detail=IRONIC_406)


def check_fields_allowed(names: Iterable[str], fields: versions.Fields, kind: str) -> None:
    """Ironic's 406 for the first of *names* that *fields* (apimw's VersionedFields) hides at the
    served version."""
    hidden = fields.hidden(api_version())
    for name in names:
        if name in hidden:
            require(f"The {kind} field {name!r}", fields.since(name))


# -- responses ----------------------------------------------------------------------------------


def encode_json(doc: Any) -> bytes:
    """*doc* as a JSON body (orjson: compact UTF-8).

    ~10x faster than ``json.dumps`` on a node document (docs/example/performance.md).
    orjson refuses an integer beyond 64 bits, a lone surrogate and a key that is not a
    string: :func:`json_body` refuses the first two in every request body (400), and JSON
    objects have only string keys.  Without ``OPT_NON_STR_KEYS``, which cost about 25% more
    on a 100-node detail page.
    """
    return orjson.dumps(doc)


def list_response(key: str, page: Page, nxt: str | None) -> Response:
    """``{key: [items], "next": nxt}`` from a page's encoded items (joined, not re-encoded)."""
    tail = b"]}" if nxt is None else b'],"next":' + encode_json(nxt) + b"}"
    body = b"".join((b'{"' + key.encode() + b'":[', b",".join(page.items), tail))
    return Response(body, status=200, headers=list(_JSON_HEADERS))


def json_response(doc: Any, status: int = 200, headers: Sequence[tuple[str, str]] = ()) -> Response:
    body = encode_json(doc)
    resp = Response(body, status=status, headers=list(_JSON_HEADERS) + list(headers))
    return resp


def empty_response(status: int, headers: Sequence[tuple[str, str]] = ()) -> Response:
    resp = Response(b"", status=status, headers=list(headers))
    # 202/204 carry no Content-Type, like Ironic.
    resp.headers.pop("Content-Type", None)
    return resp


def problem_response(problem: HTTPProblem) -> Response:
    if len(problem.detail) > MAX_DETAIL_CHARS:
        problem.detail = problem.detail[:MAX_DETAIL_CHARS] + "..."
    profile = request.environ.get(ENVIRON_PROFILE) or "ironic"
    status, headers, body = render_problem(
        problem, profile=profile, request_id=request.environ.get("openstack.request_id")
    )
    return Response(body, status=status, headers=headers)


def bad_request(detail: str, code: str = "request.invalid") -> HTTPProblem:
    return HTTPProblem(400, code, detail)


def invalid_patch(exc: Exception) -> HTTPProblem:
    """400 ``request.invalid-patch`` for a JSON Patch that cannot apply.  jsonpointer words
    a missing member ``member 'x' not found in {...}``, quoting the whole stored object it
    looked in (a node's ``driver_info``, secrets in clear): only the member is kept."""
    message = str(exc).split(" not found in ", 1)[0]
    if message != str(exc):
        message += " not found"
    return bad_request(f"Unable to apply the patch: {shorten(message, 500)}", "request.invalid-patch")


def quote(value: Any) -> str:
    """``repr(value)`` cut to :data:`MAX_QUOTED_CHARS` (error messages never echo a whole input)."""
    return shorten(repr(value))


def shorten(text: str, limit: int = MAX_QUOTED_CHARS) -> str:
    return text if len(text) <= limit else text[:limit] + "..."


def check_args(allowed: Iterable[str]) -> None:
    """Ironic's 400 "Unexpected arguments: a, b" for query parameters outside *allowed*.

    Ironic names them in a set's order; here they come in the request's order.
    """
    allowed_set = allowed if isinstance(allowed, frozenset) else frozenset(allowed)
    unexpected = [name for name in dict.fromkeys(request.args) if name not in allowed_set]
    if unexpected:
        raise bad_request(
            f"Unexpected arguments: {', '.join(shorten(name) for name in unexpected)}",
            "request.unexpected-arguments",
        )


# -- request bodies -----------------------------------------------------------------------------


def json_body(req: Request | None = None, *, allow_empty: bool = False) -> Any:
    """The request's JSON body; malformed JSON is a 400, never a 500.

    Refused with 400 before anything else sees them: nesting deeper than
    :data:`MAX_JSON_DEPTH`, lone UTF-16 surrogates (``"\\ud800"``, which no UTF-8
    encoder, canonical JSON or database accepts), ``NaN``/``Infinity`` and numbers outside
    :data:`MIN_JSON_NUMBER` .. :data:`MAX_JSON_NUMBER` (no answer could carry them: see
    :func:`encode_json`).  A body over the app's ``MAX_CONTENT_LENGTH`` is a 413.
    """
    raw = raw_body(req)
    if not raw.strip():
        if allow_empty:
            return None
        raise bad_request("The request body is empty; a JSON document is required.", "request.body-missing")
    check_json_content_type((req or request).environ.get("CONTENT_TYPE"))
    # Counting brackets is cheap and proves most bodies shallow; only the others risk the
    # (recursive) parser's RecursionError, answered as too deep.
    maybe_deep = raw.count(b"[") + raw.count(b"{") > MAX_JSON_DEPTH
    try:
        # strict UTF-8: json.loads(bytes) would let raw surrogates through ("surrogatepass")
        text = raw.decode("utf-8")
        doc = json.loads(
            text, parse_constant=_no_constant, parse_float=_bounded_float, parse_int=_bounded_int
        )
    except RecursionError:
        raise _too_deep() from None
    except (UnicodeDecodeError, ValueError) as exc:
        raise bad_request(
            f"The request body is not valid JSON: {shorten(str(exc), 200)}", "request.malformed-json"
        ) from None
    if maybe_deep or b"\\u" in raw:  # a lone surrogate can only come from a \\u escape
        check_json_document(doc, "The request body")
    return doc


def check_json_content_type(content_type: str | None) -> None:
    """415 unless a body's ``Content-Type`` is JSON (``application/json``, ``application/*+json``).

    A body without a ``Content-Type`` is read as JSON, as every Ironic client sends JSON;
    one that says it is something else (``text/plain``, a form) is not parsed as JSON.
    """
    if not content_type:
        return
    media = content_type.partition(";")[0].strip().lower()
    if media == "application/json" or (media.startswith("application/") and media.endswith("+json")):
        return
    raise HTTPProblem(
        415,
        "request.unsupported-media-type",
        f"The request body must be JSON (Content-Type: application/json), not {quote(content_type)}.",
    )


#: Flask config key of the body limit (``create_flask_app(max_body_bytes=...)``).
BODY_LIMIT_KEY: Final = "BAREMETAL_MAX_BODY_BYTES"


def raw_body(req: Request | None = None) -> bytes:
    """The request body, at most the app's body limit (413 above it).

    werkzeug refuses a larger Content-Length before reading and stops reading a
    chunked body one byte past the limit (``MAX_CONTENT_LENGTH`` is the limit + 1),
    which is how an oversized chunked body is told from one of exactly the limit.
    """
    req = req or request
    try:
        raw = req.get_data(cache=True)
    except HTTPException:
        raise  # werkzeug's own answers: 413 from Content-Length, 400 for a client gone mid-body
    except Exception:
        # The server's input stream failed: gunicorn raises its ParseException subclasses
        # (InvalidChunkSize, ChunkMissingTerminator; not OSError) for a malformed chunked body.
        raise body_incomplete() from None
    limit = int(current_app.config.get(BODY_LIMIT_KEY, MAX_BODY_BYTES))
    if len(raw) > limit:
        raise body_too_large(limit)
    return raw


def body_incomplete() -> HTTPProblem:
    return bad_request("The request body could not be read completely.", "request.body-incomplete")


def body_too_large(limit: int) -> HTTPProblem:
    return HTTPProblem(
        413,
        "request.body-too-large",
        f"The request body is larger than the limit of {limit} bytes.",
        extra={"max_bytes": limit},
    )


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


def _bounded_float(text: str) -> float:
    value = float(text)
    if not MIN_JSON_NUMBER <= value <= MAX_JSON_NUMBER:  # (infinity included)
        raise _out_of_range(text)
    return value


#: Longest integer text that may be in range: ``-9223372036854775808`` (20 characters).
_MAX_INT_CHARS: Final = len(str(MIN_JSON_NUMBER))


def _bounded_int(text: str) -> int:
    if len(text) > _MAX_INT_CHARS:  # (and no quadratic int() of a long text)
        raise _out_of_range(text)
    value = int(text)
    if not MIN_JSON_NUMBER <= value <= MAX_JSON_NUMBER:
        raise _out_of_range(text)
    return value


def _out_of_range(text: str) -> HTTPProblem:
    # an HTTPProblem, not a ValueError: the body is valid JSON, its number is what is refused
    return bad_request(
        f"The request body holds the number {shorten(text, 40)}, which is out of range: numbers "
        f"from {MIN_JSON_NUMBER} to {MAX_JSON_NUMBER} are accepted.",
        "request.number-out-of-range",
    )


def _too_deep(what: str = "The request body") -> HTTPProblem:
    return bad_request(
        f"{what} is nested too deeply: at most {MAX_JSON_DEPTH} levels of arrays and objects are accepted.",
        "request.too-deep",
    )


_SURROGATE = re.compile("[\ud800-\udfff]")


def check_json_document(doc: Any, what: str) -> None:
    """400 unless *doc* nests at most :data:`MAX_JSON_DEPTH` deep and has no lone surrogate.

    Iterative (an explicit stack), so any depth is checked without recursion.
    """
    stack: list[tuple[Any, int]] = [(doc, 1)]
    while stack:
        value, depth = stack.pop()
        if isinstance(value, str):
            if not value.isascii() and _SURROGATE.search(value):
                raise _surrogate(what)
        elif isinstance(value, dict | list):
            if depth > MAX_JSON_DEPTH:
                raise _too_deep(what)
            if isinstance(value, dict):
                for key, item in value.items():
                    if not key.isascii() and _SURROGATE.search(key):
                        raise _surrogate(what)
                    stack.append((item, depth + 1))
            else:
                stack.extend((item, depth + 1) for item in value)


def _surrogate(what: str) -> HTTPProblem:
    return bad_request(
        f"{what} contains a lone UTF-16 surrogate (such as \\ud800), which is not a valid Unicode character.",
        "request.invalid-unicode",
    )


def validate(doc: Any, schema: Mapping[str, Any], what: str) -> None:
    """JSON Schema validation with Ironic's wording: ``Schema error for node: ...``.

    The verdict is fastjsonschema's (*schema* compiled once, :func:`_compiled`); a refused
    body is worded by jsonschema's best error (the service's Draft 2020-12 validator,
    :data:`.json_schema.Validator`), so a 400 reads as it always has.  Values quoted by the
    message are cut to :data:`MAX_QUOTED_CHARS`.  A valid object's free-form JSON fields
    (:data:`schemas.FREEFORM_FIELDS`) must also nest at most :data:`MAX_JSON_DEPTH` deep
    (counted from the resource) and serialize to at most :data:`MAX_JSON_FIELD_BYTES` each:
    this runs on created and on patched documents.
    """
    accept, validator = _compiled(id(schema), schema)
    try:
        accept(doc)
    except fastjsonschema.JsonSchemaValueException as refused:
        raise _schema_error(doc, validator, refused, what) from None
    if isinstance(doc, dict):
        for name in schemas.FREEFORM_FIELDS:
            value = doc.get(name)
            if isinstance(value, dict | list):
                check_json_field(value, name, what)


def accepts(doc: Any, schema: Mapping[str, Any]) -> bool:
    """The verdict :func:`validate` acts on: whether *schema* accepts *doc*."""
    accept, _validator = _compiled(id(schema), schema)
    try:
        accept(doc)
    except fastjsonschema.JsonSchemaValueException:
        return False
    return True


def _schema_error(
    doc: Any, validator: Any, refused: fastjsonschema.JsonSchemaValueException, what: str
) -> HTTPProblem:
    """The 400 of a refused *doc*: jsonschema's best error, else fastjsonschema's own words."""
    error = jsonschema.exceptions.best_match(validator.iter_errors(doc))
    if error is None:  # (the property tests keep the two verdicts the same)
        message, instance, path = refused.message, refused.value, refused.path[1:]
    else:
        message, instance, path = error.message, error.instance, list(error.absolute_path)
    quoted = repr(instance)
    if len(quoted) > MAX_QUOTED_CHARS and quoted in message:
        message = message.replace(quoted, shorten(quoted))
    message = shorten(message, 500)
    where = shorten("/".join(str(p) for p in path))
    suffix = f" (at /{where})" if where else ""
    return bad_request(f"Schema error for {what}: {message}{suffix}", "request.schema")


def check_json_field(value: Any, name: str, what: str) -> None:
    """Depth and size limits of one free-form JSON field (400 when over)."""
    check_json_document({name: value}, f"The {name} of the {what}")
    size = len(json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode("utf-8", "replace"))
    if size > MAX_JSON_FIELD_BYTES:
        raise HTTPProblem(
            400,
            "request.field-too-large",
            f"The {name} of the {what} is {size} bytes of JSON; at most {MAX_JSON_FIELD_BYTES} "
            "bytes are accepted.",
            extra={"field": name, "max_bytes": MAX_JSON_FIELD_BYTES},
        )


#: id(schema) -> (schema, its compiled check, its jsonschema validator); the schema is kept so
#: its id stays its own.
_VALIDATORS: dict[int, tuple[Mapping[str, Any], Callable[[Any], Any], Any]] = {}


def _compiled(key: int, schema: Mapping[str, Any]) -> tuple[Callable[[Any], Any], Any]:
    """*schema*'s fastjsonschema check and jsonschema validator, made on first use.

    fastjsonschema gets the patterns with ECMA-262's ``$`` written out
    (:func:`.json_schema.ecma_schema`), fills in no defaults (the body is not changed) and
    asserts no ``format`` (an annotation, as in jsonschema without a format checker).
    """
    entry = _VALIDATORS.get(key)
    if entry is None or entry[0] is not schema:
        accept = fastjsonschema.compile(ecma_schema(schema), use_default=False, use_formats=False)
        entry = _VALIDATORS[key] = (schema, accept, Validator(schema))
    return entry[1], entry[2]


# -- links --------------------------------------------------------------------------------------


#: Flask config key of the public endpoint (``create_flask_app(public_endpoint=...)``).
PUBLIC_ENDPOINT_KEY: Final = "BAREMETAL_PUBLIC_ENDPOINT"

#: A Host header as RFC 9110 section 7.2 and RFC 3986 section 3.2.2 allow it: a registered
#: name (unreserved, sub-delims, pct-encoded) or an IP literal in brackets, then an
#: optional port.  Anything else (spaces, quotes, "/", "@", control characters, non-ASCII)
#: never reaches a link or a ``Location``: 400 before the request is served.
_HOST: Final = re.compile(r"(?:[A-Za-z0-9\-._~!$&'()*+,;=%]+|\[[0-9A-Fa-f:.]+\])(?::[0-9]{1,5})?")


def base_url() -> str:
    """``scheme://host[:port][script_name]`` the client used (no trailing slash), or the
    configured public endpoint (Ironic's ``public_endpoint``) when there is one.

    Read straight from the environ (werkzeug's ``host_url`` costs ~50 us a call).  A Host
    header that is not a host is a 400 (the app computes this before serving any request).
    """
    environ = request.environ
    cached = environ.get("baremetal.base_url")
    if cached is not None:
        return str(cached)
    url = current_app.config.get(PUBLIC_ENDPOINT_KEY)
    if not url:
        host = environ.get("HTTP_HOST")
        if host and not _HOST.fullmatch(host):  # (an empty one: SERVER_NAME, as before)
            raise bad_request(
                f"The Host header {quote(host)} is not a host name or address with an optional port.",
                "request.invalid-host",
            )
        url = request_base_url(environ)
    environ["baremetal.base_url"] = url
    return str(url)


def url_path(*segments: str) -> str:
    """``/segment/segment...`` with each segment percent-encoded: a value that reaches a URL
    (a name, a trait) can never change the URL's structure nor break the header it goes into."""
    return "".join("/" + url_quote(segment, safe="") for segment in segments)


def location(*segments: str) -> tuple[str, str]:
    """The ``Location`` header of ``/v1/<segments...>`` (:func:`url_path`)."""
    return ("Location", f"{base_url()}/v1{url_path(*segments)}")


def make_links(resource: str, ident: str, base: str | None = None) -> list[dict[str, str]]:
    base = base if base is not None else base_url()
    path = url_path(*resource.split("/"), ident)  # resource: a route's own path (volume/targets)
    return [
        {"href": f"{base}/v1{path}", "rel": "self"},
        {"href": f"{base}{path}", "rel": "bookmark"},
    ]


# -- query parameters ---------------------------------------------------------------------------


def parse_fields(fields: versions.Fields, kind: str) -> list[str] | None:
    """``?fields=a,b`` -> ["a", "b"] after version and name checks; None when absent."""
    raw = request.args.get("fields")
    if raw is None:
        return None
    require("The 'fields' parameter", versions.FIELDS_SELECTOR)
    names = [f.strip() for f in raw.split(",") if f.strip()]
    known = set(fields.names)
    unknown = [n for n in names if n not in known]
    if unknown:
        raise bad_request(f'Field(s) "{", ".join(unknown)}" are not valid', "request.invalid-fields")
    check_fields_allowed(names, fields, kind)
    return names


def parse_bool(name: str, raw: str | None) -> bool | None:
    if raw is None:
        return None
    lowered = raw.strip().lower()
    if lowered in ("true", "1", "yes", "on", "y", "t"):
        return True
    if lowered in ("false", "0", "no", "off", "n", "f"):
        return False
    raise bad_request(f"Invalid value for {name}: {raw!r} is not a boolean.", "request.invalid-parameter")


_DIGITS = re.compile(rf"[0-9]{{1,{MAX_INTEGER_DIGITS}}}")


def parse_int(name: str, raw: str) -> int:
    """An integer query parameter: ASCII digits only (no ``²``, no sign), bounded length."""
    text = raw.strip()
    if not _DIGITS.fullmatch(text):
        raise bad_request(
            f"Invalid value for {name}: {quote(raw)} is not a non-negative integer of at most "
            f"{MAX_INTEGER_DIGITS} ASCII digits.",
            "request.invalid-parameter",
        )
    return int(text)


def check_query_args() -> None:
    """400 for a NUL character in any query parameter (no database can compare with one)."""
    for name, value in request.args.items(multi=True):
        if "\x00" in value or "\x00" in name:
            raise bad_request(
                f"Invalid value for {shorten(ascii(name))}: query parameters cannot contain NUL characters.",
                "request.invalid-parameter",
            )


def query_uuid(name: str) -> str | None:
    """A query parameter typed as a UUID (``node_uuid``, ``chassis_uuid``...): 400 if it is not one."""
    value = request.args.get(name)
    if value is not None and not UUID_RE.match(value):
        raise bad_request(
            f"Invalid value for {name}: expected a UUID but received {quote(value)}.",
            "request.invalid-parameter",
        )
    return value


def parse_paging(sort_keys: Iterable[str]) -> dict[str, Any]:
    """limit, marker, sort_key, sort_dir, checked."""
    args = request.args
    check_query_args()
    limit_raw = args.get("limit")
    limit = MAX_LIMIT
    if limit_raw is not None:
        limit = parse_int("limit", limit_raw)
        if limit <= 0:
            raise bad_request("Limit must be positive", "request.invalid-parameter")
        limit = min(limit, MAX_LIMIT)
    sort_dir = args.get("sort_dir", "asc")
    if sort_dir not in ("asc", "desc"):
        raise bad_request(
            f"Invalid sort direction: {sort_dir}. Acceptable values are 'asc' or 'desc'",
            "request.invalid-parameter",
        )
    sort_key = args.get("sort_key", "id")
    allowed = set(sort_keys) | {"id"}
    if sort_key not in allowed:
        raise bad_request(
            f"The sort_key value {sort_key} is an invalid field for sorting", "request.invalid-parameter"
        )
    return {
        "limit": limit,
        "marker": args.get("marker") or None,
        "sort_key": sort_key,
        "sort_dir": sort_dir,
        "limit_given": limit_raw is not None,
    }


#: ``fetch(count, marker) -> (documents, their uuids)``: at most *count* items after *marker*.
Fetch = Callable[[int, "str | None"], tuple[Sequence[Any], Sequence[str]]]


@dataclass(slots=True)
class Page:
    """A list page: its items as JSON, the uuid of the last one, whether more may follow."""

    items: list[bytes]
    last: str | None
    more: bool

    @property
    def next_marker(self) -> str | None:
        """Where the next page starts: the last item, when the page stopped at the limit or
        at the byte budget (its ``next`` link is due)."""
        return self.last if self.more else None


PAGE_BYTES_KEY: Final = "BAREMETAL_MAX_PAGE_BYTES"


def collect_page(fetch: Fetch, limit: int, marker: str | None, *, large: bool = True) -> Page:
    """Up to *limit* items after *marker*, read and encoded a chunk at a time, until the next
    item would take the page past the app's page byte budget (:data:`MAX_PAGE_BYTES`).

    The rows read at once are bounded too: *large* (items that may carry big JSON fields)
    starts with :data:`PAGE_CHUNK_ROWS` rows, then reads as many as the budget left holds at
    the bytes per item seen; otherwise one read takes the page.  Each read continues after the
    last item (the ``marker`` a client sends).  ``more``: the page stopped at *limit* or at
    the budget (its ``next`` link is due).
    """
    budget = int(current_app.config.get(PAGE_BYTES_KEY, MAX_PAGE_BYTES))
    items: list[bytes] = []
    used = 0
    last = marker
    count = min(limit, PAGE_CHUNK_ROWS) if large else limit
    while True:
        try:
            docs, uuids = fetch(count, last)
        except HTTPProblem as problem:  # the last item vanished between two reads
            if problem.status != 404 or last == marker:
                raise
            return Page(items, last, True)
        for doc, uuid in zip(docs, uuids, strict=True):
            encoded = encode_json(doc)
            if items and used + len(encoded) > budget:
                return Page(items, last, True)
            items.append(encoded)
            used += len(encoded)
            last = uuid
        if len(items) >= limit:
            return Page(items, last, True)
        if len(docs) < count:
            return Page(items, last, False)
        count = min(limit - len(items), max(1, (budget - used) * len(items) // max(used, 1)))


def next_link(
    marker: str | None,
    resource: str,
    paging: Mapping[str, Any],
    fields: Sequence[str],
    extra: Mapping[str, str] | None = None,
    *,
    path: str | None = None,
) -> str | None:
    """The link to the page after *marker* (``None``: there is no next page), with the
    request's sort, fields, filters and limit.  A page's marker is :attr:`Page.next_marker`."""
    if marker is None:
        return None
    query: dict[str, str] = {"sort_key": paging["sort_key"], "sort_dir": paging["sort_dir"]}
    if fields:
        query["fields"] = ",".join(fields)
    query.update(extra or {})
    query["limit"] = str(paging["limit"])
    query["marker"] = marker
    return f"{base_url()}/v1/{path or resource}?{urlencode(query, safe=',')}"


def select(doc: dict[str, Any], fields: Sequence[str] | None) -> dict[str, Any]:
    """Keep *fields* (and links) of *doc*."""
    if fields is None:
        return doc
    keep = set(fields)
    keep.add("links")
    return {k: v for k, v in doc.items() if k in keep}
