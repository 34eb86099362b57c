"""Plumbing shared by every controller: versions, JSON bodies, links, fields, paging, errors."""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Final
from urllib.parse import urlencode

import jsonschema
from flask import Request, Response, request

from apimw._version import Version
from apimw.discovery import request_base_url
from apimw.errors import ENVIRON_PROFILE, HTTPProblem, render_problem

from . import versions

#: Environ key the microversion middleware fills (apimw.microversion.ENVIRON_VERSION).
ENVIRON_VERSION: Final = "apimw.microversion"

MAX_LIMIT: Final = 1000
UUID_RE: Final = re.compile(
    r"^[0-9a-fA-F]{8}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{12}$"
)

_JSON_HEADERS: Final = (("Content-Type", "application/json"),)


# -- version ------------------------------------------------------------------------------------


def api_version() -> Version:
    """The version this request is served at (the minimum when no middleware negotiated one)."""
    served = request.environ.get(ENVIRON_VERSION)
    return served if isinstance(served, Version) else versions.MIN_VERSION


def not_acceptable(what: str, needed: Version) -> HTTPProblem:
    """Ironic's 406 for a field/parameter/verb newer than the served version."""
    served = api_version()
    return HTTPProblem(
        406,
        "microversion.feature-unavailable",
        f"Request not acceptable. {what} requires API version {needed} or later; "
        f"the request was served at {served}.",
        extra={"required_version": str(needed), "served_version": str(served)},
    )


def require(what: str, needed: Version) -> None:
    if api_version() < needed:
        raise not_acceptable(what, needed)


def check_fields_allowed(names: Iterable[str], table: Mapping[str, Version], kind: str) -> None:
    served = api_version()
    for name in names:
        needed = table.get(name)
        if needed is not None and served < needed:
            raise not_acceptable(f"The {kind} field {name!r}", needed)


# -- responses ----------------------------------------------------------------------------------


def json_response(doc: Any, status: int = 200, headers: Sequence[tuple[str, str]] = ()) -> Response:
    body = json.dumps(doc)
    resp = Response(body, status=status, headers=list(_JSON_HEADERS) + list(headers))
    return resp


def empty_response(status: int, headers: Sequence[tuple[str, str]] = ()) -> Response:
    resp = Response(b"", status=status, headers=list(headers))
    # 202/204 carry no Content-Type, like Ironic.
    resp.headers.pop("Content-Type", None)
    return resp


def problem_response(problem: HTTPProblem) -> Response:
    profile = request.environ.get(ENVIRON_PROFILE) or "ironic"
    status, headers, body = render_problem(
        problem, profile=profile, request_id=request.environ.get("openstack.request_id")
    )
    return Response(body, status=status, headers=headers)


def bad_request(detail: str, code: str = "request.invalid") -> HTTPProblem:
    return HTTPProblem(400, code, detail)


# -- request bodies -----------------------------------------------------------------------------


def json_body(req: Request | None = None, *, allow_empty: bool = False) -> Any:
    """The request's JSON body; malformed JSON is a 400, never a 500."""
    req = req or request
    raw = req.get_data(cache=True)
    if not raw.strip():
        if allow_empty:
            return None
        raise bad_request("The request body is empty; a JSON document is required.", "request.body-missing")
    try:
        return json.loads(raw)
    except (UnicodeDecodeError, ValueError) as exc:
        raise bad_request(f"The request body is not valid JSON: {exc}", "request.malformed-json") from None


def validate(doc: Any, schema: Mapping[str, Any], what: str) -> None:
    """jsonschema validation with Ironic's wording: ``Schema error for node: ...``."""
    validator = _validator(id(schema), schema)
    error = jsonschema.exceptions.best_match(validator.iter_errors(doc))
    if error is not None:
        where = "/".join(str(p) for p in error.absolute_path)
        suffix = f" (at /{where})" if where else ""
        raise bad_request(f"Schema error for {what}: {error.message}{suffix}", "request.schema")


_VALIDATORS: dict[int, Any] = {}


def _validator(key: int, schema: Mapping[str, Any]) -> Any:
    validator = _VALIDATORS.get(key)
    if validator is None:
        validator = _VALIDATORS[key] = jsonschema.Draft202012Validator(schema)
    return validator


# -- links --------------------------------------------------------------------------------------


def base_url() -> str:
    """``scheme://host[:port][script_name]`` the client used (no trailing slash).

    Read straight from the environ (werkzeug's ``host_url`` costs ~50 us a call).
    """
    environ = request.environ
    cached = environ.get("baremetal.base_url")
    if cached is not None:
        return str(cached)
    url = request_base_url(environ)
    environ["baremetal.base_url"] = url
    return url


def make_links(resource: str, ident: str, base: str | None = None) -> list[dict[str, str]]:
    base = base if base is not None else base_url()
    return [
        {"href": f"{base}/v1/{resource}/{ident}", "rel": "self"},
        {"href": f"{base}/{resource}/{ident}", "rel": "bookmark"},
    ]


# -- query parameters ---------------------------------------------------------------------------


def parse_fields(table: Mapping[str, Version], known: Iterable[str], kind: str) -> list[str] | None:
    """``?fields=a,b`` -> ["a", "b"] after version and name checks; None when absent."""
    raw = request.args.get("fields")
    if raw is None:
        return None
    require("The 'fields' parameter", versions.FIELDS_SELECTOR)
    names = [f.strip() for f in raw.split(",") if f.strip()]
    known_set = set(known)
    unknown = [n for n in names if n not in known_set]
    if unknown:
        raise bad_request(f'Field(s) "{", ".join(unknown)}" are not valid', "request.invalid-fields")
    check_fields_allowed(names, table, kind)
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


def parse_paging(sort_keys: Iterable[str]) -> dict[str, Any]:
    """limit, marker, sort_key, sort_dir, checked."""
    args = request.args
    limit_raw = args.get("limit")
    limit = MAX_LIMIT
    if limit_raw is not None:
        if not limit_raw.strip().isdigit():
            raise bad_request(f"Invalid value for limit: {limit_raw!r}.", "request.invalid-parameter")
        limit = int(limit_raw)
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


def next_link(
    resource: str,
    items: Sequence[Mapping[str, Any]],
    paging: Mapping[str, Any],
    fields: Sequence[str],
    extra: Mapping[str, str] | None = None,
    *,
    path: str | None = None,
) -> str | None:
    """Ironic's ``next`` link when the page is full.

    *items* are the stored records (they always carry ``uuid``), not the rendered
    documents, which hold only the fields the client asked for.
    """
    if not items or len(items) < paging["limit"]:
        return None
    query: dict[str, str] = {"sort_key": paging["sort_key"], "sort_dir": paging["sort_dir"]}
    if fields:
        query["fields"] = ",".join(fields)
    query.update(extra or {})
    query["limit"] = str(paging["limit"])
    query["marker"] = str(items[-1]["uuid"])
    return f"{base_url()}/v1/{path or resource}?{urlencode(query, safe=',')}"


def select(doc: dict[str, Any], fields: Sequence[str] | None) -> dict[str, Any]:
    """Keep *fields* (and links) of *doc*."""
    if fields is None:
        return doc
    keep = set(fields)
    keep.add("links")
    return {k: v for k, v in doc.items() if k in keep}
