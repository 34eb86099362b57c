"""The HTTP side of every declared resource (:mod:`baremetal_service.objects.resource`).

:class:`Endpoints` serves one declaration: list (``?detail``, ``?fields``, filters at
their versions, paging with ``next`` links), get, create (JSON schema, fields of the
served version, ``Location``), PATCH (JSON Patch on the patchable fields, the patched
document validated again) and DELETE, with the ETag header at >= 1.116 and If-Match
handed to the CRUD, which checks it atomically with the write.  A query parameter the
endpoint does not take is a 400 like Ironic's ("Unexpected arguments: foo").

:func:`blueprint` builds the routes of a declaration whose ``routes`` is true
(``/v1/<collection>``, ``/detail``, ``/<ident>``); resources with more (sub-collections,
version rules of their own) route themselves in their API module and call the same
endpoints.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final

import jsonpatch
from flask import Blueprint, Response, request

from apimw import VersionGate
from baremetal_service import schemas, versions
from baremetal_service.handlers import common, masking, serialize
from baremetal_service.handlers.context import if_match, project_id, service, token
from baremetal_service.handlers.json_schema import ecma_regex
from baremetal_service.objects.catalog import declarations
from baremetal_service.objects.resource import Resource

__all__ = ["Endpoints", "Resource", "blueprint", "declarations", "endpoints", "item_routes"]

#: Query parameters every list takes (Ironic's), besides the resource's filters.
LIST_ARGS: Final = frozenset({"fields", "limit", "marker", "sort_key", "sort_dir"})
GET_ARGS: Final = frozenset({"fields"})

_BUILTIN_KINDS: Final = frozenset({"node", "port", "portgroup", "chassis"})
_LOGICAL_NAME: Final = ecma_regex(schemas.NAME_PATTERN)


#: Ironic's words for a resource a version does not have (the 404 of a read, the 405 of a write)
VERSION_DENIED: Final = "The API version does not allow {what}"
NOT_FOUND: Final = "The resource could not be found."


class Endpoints:
    """The HTTP handlers of one declared resource."""

    def __init__(self, decl: Resource) -> None:
        self.decl = decl
        filters = {name for name, _since in decl.filters} | set(decl.filter_kwargs)
        detail = {"detail"} if decl.detail_since is not None else set()
        self.list_args: frozenset[str] = LIST_ARGS | filters | detail | set(decl.ignored_args)
        if decl.kind not in _BUILTIN_KINDS:
            serialize.register(decl.kind, decl.fields, defaults=decl.defaults)
        #: the answers below the resource's version: reads 404 (the route does not exist yet),
        #: writes 404 too or, declared so, 405
        self.read_gate: VersionGate | None = None
        self.write_gate: VersionGate | None = None
        if decl.since > versions.MIN_VERSION:
            what = f"{decl.name}s"
            if decl.refuse_early_writes:
                self.read_gate = VersionGate.route(decl.since, what=what, detail=VERSION_DENIED)
                self.write_gate = VersionGate.method(decl.since, what=what, detail=VERSION_DENIED)
            else:
                self.read_gate = self.write_gate = VersionGate.route(decl.since, what=what, detail=NOT_FOUND)

    def __getattr__(self, name: str) -> Any:  # the declaration's attributes (kind, fields...)
        return getattr(self.decl, name)

    def crud(self) -> Any:
        return service().crud[self.decl.kind]

    def gate(self) -> None:
        """The resource's version gate of the request's method (404 or 405 below its version)."""
        gate = self.read_gate if request.method in ("GET", "HEAD") else self.write_gate
        if gate is not None:
            gate.check(request.environ)

    def check_ident(self, ident: str) -> None:
        """Ironic's 400 for an identifier that is neither a UUID nor a logical name."""
        name = self.decl.ident_name
        if name and not (common.UUID_RE.match(ident) or _LOGICAL_NAME.fullmatch(ident)):
            raise common.bad_request(
                f"Expected UUID or name for {name}: {common.shorten(ident)}", "request.invalid-identifier"
            )

    def doc(self, obj: Any, fields: Sequence[str] | None = None) -> dict[str, Any]:
        decl = self.decl
        return serialize.simple_doc(
            decl.kind, decl.collection, obj, common.api_version(), common.base_url(), fields, decl.sublinks
        )

    @staticmethod
    def etag_headers(obj: Any) -> list[tuple[str, str]]:
        etag = serialize.get(obj, "etag")
        if etag and common.api_version() >= versions.ETAG_VERSION:
            return [("ETag", etag)]
        return []

    # -- handlers --------------------------------------------------------------------------

    def index(
        self,
        detail: bool = False,
        *,
        scope: Mapping[str, Any] | Callable[[], Mapping[str, Any]] | None = None,
        path: str | None = None,
    ) -> Response:
        """The list; *scope* (or a function giving it, called after the argument checks)
        adds CRUD filters (``{"node": uuid}`` for a node's ports)."""
        decl = self.decl
        self.gate()
        common.check_args(self.list_args)
        served = common.api_version()
        fields = common.parse_fields(decl.fields, decl.kind)
        detail_arg = common.parse_bool("detail", request.args.get("detail"))
        if detail_arg is not None:
            if detail:
                raise common.bad_request("Can not specify ?detail=True parameter to this endpoint.")
            common.require("The 'detail' parameter", decl.detail_since or versions.DETAIL_QUERY)
            detail = detail_arg
        if detail and fields is not None:
            raise common.bad_request("Can not specify ?detail=True and fields in the same request.")
        paging = common.parse_paging(decl.sort_keys)
        filters: dict[str, Any] = {}
        for name, since in decl.filters:
            value = common.query_uuid(name) if name.endswith("_uuid") else request.args.get(name)
            if value is not None:
                common.require(f"Filtering {decl.collection} by {name}", since)
                filters[name] = value
        kwargs: dict[str, Any] = {}
        for name, value in filters.items():  # the first of two aliases wins (node before node_uuid)
            kwargs.setdefault(decl.filter_kwargs.get(name, name), value)
        if scope is not None:
            kwargs.update(scope() if callable(scope) else scope)
        if detail:
            shown: list[str] | None = None
        elif fields is not None:
            shown = fields
        else:
            shown = list(decl.fields.visible(decl.list_fields, served))
        crud, caller = self.crud(), project_id()

        def fetch(count: int, marker: str | None) -> tuple[list[dict[str, Any]], list[str]]:
            items = crud.list(project_id=caller, **kwargs, limit=count, marker=marker,
                              sort_key=paging["sort_key"], sort_dir=paging["sort_dir"])  # fmt: skip
            return [self.doc(i, shown) for i in items], [i["uuid"] for i in items]

        page = common.collect_page(fetch, paging["limit"], paging["marker"])
        extra = {k: str(v) for k, v in filters.items()}
        if detail_arg:  # the next page is a detail page too
            extra["detail"] = "true"
        nxt = common.next_link(page.next_marker, decl.collection, paging, shown or [], extra, path=path)
        return common.list_response(decl.list_key or decl.collection, page, nxt)

    def get(self, ident: str) -> Response:
        decl = self.decl
        self.gate()
        self.check_ident(ident)
        common.check_args(GET_ARGS)
        fields = common.parse_fields(decl.fields, decl.kind)
        obj = self.crud().get(ident, project_id=project_id())
        return common.json_response(self.doc(obj, fields), headers=self.etag_headers(obj))

    def create(self, schema: Mapping[str, Any] | None = None) -> Response:
        """POST: *schema* overrides the declaration's (a schema of the served version)."""
        decl = self.decl
        self.gate()
        body = common.json_body()
        common.validate(body, schema or decl.create_schema, decl.kind)
        common.check_fields_allowed(body, decl.fields, decl.kind)
        obj = self.crud().create(dict(body), project_id=project_id(), token=token())
        doc = self.doc(obj)
        where = common.location(*decl.collection.split("/"), doc["uuid"])  # volume/connectors: two segments
        return common.json_response(doc, 201, [where, *self.etag_headers(obj)])

    def patch(self, ident: str) -> Response:
        decl = self.decl
        self.gate()
        self.check_ident(ident)
        patch = common.json_body()
        common.validate(patch, schemas.PATCH, "patch")
        allowed = set(decl.patchable)
        touched = set()
        for op in patch:
            name = op["path"].split("/")[1].replace("~1", "/").replace("~0", "~")
            if name not in allowed:
                raise common.bad_request(
                    f"Cannot patch {op['path']}. Only the following can be updated: "
                    f"{', '.join(decl.patchable)}",
                    "request.read-only-field",
                )
            if op["op"] in ("add", "replace") and "value" not in op:
                raise common.bad_request(f"'add' and 'replace' operations need a value (path {op['path']}).")
            touched.add(name)
        common.check_fields_allowed(touched, decl.fields, decl.kind)

        def changes(current_obj: dict[str, Any]) -> dict[str, Any]:
            return self._patched_changes(current_obj, patch)

        obj = self.crud().update(ident, changes, project_id=project_id(), if_match=if_match())
        return common.json_response(self.doc(obj), headers=self.etag_headers(obj))

    def _patched_changes(self, obj: dict[str, Any], patch: list[dict[str, Any]]) -> dict[str, Any]:
        decl = self.decl
        current = {f: copy.deepcopy(serialize.get(obj, f)) for f in decl.patchable}
        try:
            patched = jsonpatch.apply_patch(current, patch)
        except (jsonpatch.JsonPatchException, jsonpatch.JsonPointerException) as exc:
            raise common.invalid_patch(exc) from None
        for name in set(decl.patchable) - set(patched):
            patched[name] = serialize.default_for(name)
        for name in serialize.MASKED.get(decl.kind, {}).keys() & set(decl.patchable):
            # a masked value sent back as it was shown keeps the stored one (as for nodes)
            shown = serialize.mask_field(name, current[name], kind=decl.kind)
            patched[name] = masking.restore_masked(patched[name], current[name], shown)
        props = decl.create_schema["properties"]
        check = {k: v for k, v in patched.items() if v is not None or "null" in str(props[k].get("type"))}
        # A mandatory field removed by the patch is missing here: "'node_uuid' is a required property".
        common.validate(check, decl.create_schema, decl.kind)
        return {f: patched[f] for f in decl.patchable if patched[f] != current[f]}

    def delete(self, ident: str) -> Response:
        self.gate()
        self.check_ident(ident)
        self.crud().delete(ident, project_id=project_id(), if_match=if_match())
        return common.empty_response(204)


_ENDPOINTS: dict[str, Endpoints] = {}


def endpoints(decl: Resource) -> Endpoints:
    """The (one) :class:`Endpoints` of *decl*."""
    found = _ENDPOINTS.get(decl.kind)
    if found is None:
        found = _ENDPOINTS[decl.kind] = Endpoints(decl)
    return found


def blueprint(decl: Resource) -> Blueprint:
    """The generic routes of *decl*: list, ``/detail``, create, get, patch, delete."""
    http = endpoints(decl)
    bp = Blueprint(f"declared_{decl.kind}", __name__)
    base = f"/v1/{decl.collection}"

    def list_all() -> Response:
        return http.index()

    def list_detail() -> Response:
        return http.index(True, path=f"{decl.collection}/detail")

    def create() -> Response:
        return http.create()

    bp.add_url_rule(base, "list", list_all, methods=["GET"])
    if decl.detail_route:
        bp.add_url_rule(f"{base}/detail", "list_detail", list_detail, methods=["GET"])
    bp.add_url_rule(base, "create", create, methods=["POST"])
    item_routes(bp, http)
    return bp


def item_routes(bp: Blueprint, http: Endpoints, *, patch: Callable[[str], Response] | None = None) -> None:
    """Add the generic routes of one item of *http*'s resource to *bp*: get, patch, delete
    ``/v1/<collection>/<ident>``; *patch* replaces the generic PATCH (a resource with version
    rules of its own)."""
    item = f"/v1/{http.decl.collection}/<ident>"
    bp.add_url_rule(item, "get", http.get, methods=["GET"])
    bp.add_url_rule(item, "patch", patch or http.patch, methods=["PATCH"])
    bp.add_url_rule(item, "delete", http.delete, methods=["DELETE"])


def blueprints() -> list[Blueprint]:
    """The generated blueprints of every declaration whose ``routes`` is true."""
    return [blueprint(d) for d in declarations() if d.routes and not d.own_controller]
