"""CRUD shared by ports, portgroups and chassis (nodes have their own controller)."""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import jsonpatch
from flask import Response, request

from apimw._version import Version

from . import schemas, serialize, versions
from .common import (
    api_version,
    bad_request,
    base_url,
    check_fields_allowed,
    empty_response,
    json_body,
    json_response,
    next_link,
    parse_bool,
    parse_fields,
    parse_paging,
    query_uuid,
    require,
    validate,
)
from .context import if_match, project_id, service


@dataclass(frozen=True)
class Resource:
    kind: str  # "port"
    collection: str  # "ports"
    field_versions: Mapping[str, Version]
    fields: tuple[str, ...]
    list_fields: tuple[str, ...]
    create_schema: Mapping[str, Any]
    patchable: tuple[str, ...]
    sort_keys: tuple[str, ...]
    since: Version = versions.MIN_VERSION
    sublinks: tuple[str, ...] = ()
    filters: tuple[tuple[str, Version], ...] = ()
    service_name: str = ""  # method suffix on the service: create_<name>...
    #: the service scopes this resource to the caller's project (chassis are global)
    scoped: bool = True
    #: query parameter -> the service's list keyword (e.g. node_uuid -> node)
    filter_kwargs: Mapping[str, str] = field(default_factory=dict)
    #: turns request filters/body values into the service's (e.g. node name -> uuid)
    prepare: Callable[[dict[str, Any]], dict[str, Any]] | None = None
    extra_detail: Sequence[str] = field(default_factory=tuple)
    #: the attribute of the service that serves this resource ("" = the service itself),
    #: e.g. "allocations" -> service().allocations.create_allocation(...)
    backend: str = ""
    #: the list's JSON key and ``list_<key>`` service method, when not the collection
    #: (``/v1/volume/connectors`` lists ``"connectors"``)
    list_key: str = ""
    #: ``?detail=`` is accepted from this version (Ironic's volume lists take it from 1.32)
    detail_since: Version = versions.DETAIL_QUERY

    def backend_of(self) -> Any:
        svc = service()
        return getattr(svc, self.backend) if self.backend else svc

    @property
    def svc_name(self) -> str:
        return self.service_name or self.kind

    def gate(self) -> None:
        if self.since > versions.MIN_VERSION and api_version() < self.since:
            # Ironic answers 404 for a whole resource that does not exist yet at this version.
            from apimw.errors import HTTPProblem

            raise HTTPProblem(404, "request.not-found", "The resource could not be found.")

    def doc(self, obj: Any, fields: Sequence[str] | None = None) -> dict[str, Any]:
        return serialize.simple_doc(
            self.kind, self.collection, obj, api_version(), base_url(), fields, self.sublinks
        )

    def scope(self) -> dict[str, Any]:
        return {"project_id": project_id()} if self.scoped else {}

    def etag_headers(self, obj: Any) -> list[tuple[str, str]]:
        etag = serialize.get(obj, "etag")
        if etag and api_version() >= versions.ETAG_VERSION:
            return [("ETag", etag)]
        return []

    # -- handlers --------------------------------------------------------------------------

    def index(
        self,
        detail: bool = False,
        *,
        scope: Mapping[str, Any] | None = None,
        path: str | None = None,
    ) -> Response:
        self.gate()
        served = api_version()
        fields = parse_fields(self.field_versions, self.fields, self.kind)
        detail_arg = parse_bool("detail", request.args.get("detail"))
        if detail_arg is not None:
            if detail:
                raise bad_request("Can not specify ?detail=True parameter to this endpoint.")
            require("The 'detail' parameter", self.detail_since)
            detail = detail_arg
        if detail and fields is not None:
            raise bad_request("Can not specify ?detail=True and fields in the same request.")
        paging = parse_paging(self.sort_keys)
        filters: dict[str, Any] = {}
        for name, since in self.filters:
            value = query_uuid(name) if name.endswith("_uuid") else request.args.get(name)
            if value is not None:
                require(f"Filtering {self.collection} by {name}", since)
                filters[name] = value
        kwargs: dict[str, Any] = {}
        for name, value in filters.items():  # the first of two aliases wins (node before node_uuid)
            kwargs.setdefault(self.filter_kwargs.get(name, name), value)
        kwargs.update(scope or {})
        key = self.list_key or self.collection
        items = getattr(self.backend_of(), f"list_{key}")(
            **self.scope(),
            **kwargs,
            limit=paging["limit"],
            marker=paging["marker"],
            sort_key=paging["sort_key"],
            sort_dir=paging["sort_dir"],
        )
        if detail:
            shown: list[str] | None = None
        elif fields is not None:
            shown = fields
        else:
            shown = [
                f for f in self.list_fields if self.field_versions.get(f, versions.MIN_VERSION) <= served
            ]
        docs = [self.doc(i, shown) for i in items]
        out: dict[str, Any] = {key: docs}
        extra = {k: str(v) for k, v in filters.items()}
        nxt = next_link(self.collection, items, paging, shown or [], extra, path=path)
        if nxt:
            out["next"] = nxt
        return json_response(out)

    def get(self, ident: str) -> Response:
        self.gate()
        fields = parse_fields(self.field_versions, self.fields, self.kind)
        obj = getattr(self.backend_of(), f"get_{self.svc_name}")(ident, **self.scope())
        return json_response(self.doc(obj, fields), headers=self.etag_headers(obj))

    def create(self) -> Response:
        self.gate()
        body = json_body()
        validate(body, self.create_schema, self.kind)
        check_fields_allowed(body, self.field_versions, self.kind)
        values = dict(body)
        if self.prepare is not None:
            values = self.prepare(values)
        obj = getattr(self.backend_of(), f"create_{self.svc_name}")(values, **self.scope())
        doc = self.doc(obj)
        location = f"{base_url()}/v1/{self.collection}/{doc['uuid']}"
        return json_response(doc, 201, [("Location", location), *self.etag_headers(obj)])

    def patch(self, ident: str) -> Response:
        self.gate()
        patch = json_body()
        validate(patch, schemas.PATCH, "patch")
        allowed = set(self.patchable)
        touched = set()
        for op in patch:
            name = op["path"].split("/")[1].replace("~1", "/").replace("~0", "~")
            if name not in allowed:
                raise bad_request(
                    f"Cannot patch {op['path']}. Only the following can be updated: "
                    f"{', '.join(self.patchable)}",
                    "request.read-only-field",
                )
            if op["op"] in ("add", "replace") and "value" not in op:
                raise bad_request(f"'add' and 'replace' operations need a value (path {op['path']}).")
            touched.add(name)
        check_fields_allowed(touched, self.field_versions, self.kind)

        def changes(current_obj: dict[str, Any]) -> dict[str, Any]:
            return self._patched_changes(current_obj, patch)

        obj = getattr(self.backend_of(), f"update_{self.svc_name}")(
            ident, changes, **self.scope(), if_match=if_match()
        )
        return json_response(self.doc(obj), headers=self.etag_headers(obj))

    def _patched_changes(self, obj: dict[str, Any], patch: list[dict[str, Any]]) -> dict[str, Any]:
        allowed = set(self.patchable)
        current = {f: copy.deepcopy(serialize.get(obj, f)) for f in self.patchable}
        try:
            patched = jsonpatch.apply_patch(current, patch)
        except (jsonpatch.JsonPatchException, jsonpatch.JsonPointerException) as exc:
            raise bad_request(f"Unable to apply the patch: {exc}", "request.invalid-patch") from None
        for name in allowed - set(patched):
            patched[name] = serialize.default_for(name)
        props = self.create_schema["properties"]
        check = {k: v for k, v in patched.items() if v is not None or "null" in str(props[k].get("type"))}
        # A mandatory field removed by the patch is missing here: "'node_uuid' is a required property".
        validate(check, self.create_schema, self.kind)
        return {f: patched[f] for f in self.patchable if patched[f] != current[f]}

    def delete(self, ident: str) -> Response:
        self.gate()
        getattr(self.backend_of(), f"delete_{self.svc_name}")(ident, **self.scope(), if_match=if_match())
        return empty_response(204)
