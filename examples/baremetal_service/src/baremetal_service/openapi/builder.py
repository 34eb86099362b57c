"""The builder of one version's document: the paths and schemas of what that version serves.

A :class:`Builder` holds the version, the paths and component schemas built so far, and the
helpers every path builder uses (an operation is added only if the router serves it and the
version has it; responses with the microversion headers; a resource's schemas, list
parameters and request bodies).  The generic resource paths (list, detail, create, show,
update, delete and sub-collections) are its own; the rest is in the path modules.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Iterable
from typing import Any

from apimw import Version
from apimw.etag import ETAG_HEADER
from apimw.idempotency import REPLAYED_HEADER
from apimw.microversion import STANDARD_HEADER
from baremetal_service import versions
from baremetal_service.handlers import serialize
from baremetal_service.objects.resource import Resource
from baremetal_service.openapi.declarations import (
    LINKS,
    OPERATION_SINCE,
    READ_ERRORS,
    READ_ONLY_TYPES,
    UUID_PATTERN,
    WRITE_ERRORS,
    create_schema_at,
    filter_schema,
)

#: (path template with every parameter as ``{}``, method): what the router serves.
Routes = frozenset[tuple[str, str]]


def normal_path(path: str) -> str:
    """*path* with every ``{parameter}`` as ``{}`` and no trailing slash."""
    return re.sub(r"\{[^}]+\}", "{}", path).rstrip("/") or "/"


class Builder:
    """The paths and schemas of the document of *version* (*routes*: what the router serves)."""

    def __init__(self, version: Version, decls: Iterable[Resource], routes: Routes) -> None:
        self.version = version
        self.etags = version >= versions.ETAG_VERSION
        self.paths: dict[str, dict[str, Any]] = {}
        self.schemas: dict[str, Any] = {}
        self.decls = {d.collection: d for d in decls}
        self.routes = routes

    # -- helpers -----------------------------------------------------------------------------------

    def visible(self, decl: Resource, names: Iterable[str]) -> list[str]:
        return [n for n in names if self.field_since(decl, n) <= self.version]

    def field_since(self, decl: Resource, name: str) -> Version:
        return max(decl.fields.since(name) or versions.MIN_VERSION, decl.since)

    def add(self, path: str, method: str, op: dict[str, Any], since: Version = versions.MIN_VERSION) -> None:
        if since > self.version or (normal_path(path), method) not in self.routes:
            return
        op.setdefault("x-introduced-in", str(since))
        params = op.setdefault("parameters", [])
        for name in re.findall(r"\{([^}]+)\}", path):
            params.insert(0, {"name": name, "in": "path", "required": True, "schema": {"type": "string"}})
        params.extend(self.version_parameters())
        self.paths.setdefault(path, {})[method] = op

    def version_parameters(self) -> list[dict[str, Any]]:
        return [
            {"$ref": "#/components/parameters/LegacyVersion"},
            {"$ref": "#/components/parameters/StandardVersion"},
        ]

    def response(
        self,
        status: int,
        description: str,
        schema: dict[str, Any] | None = None,
        *,
        etag: bool = False,
        location: bool = False,
        replay: bool = False,
        headers: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        out_headers: dict[str, Any] = {
            "X-OpenStack-Ironic-API-Minimum-Version": {"$ref": "#/components/headers/MinimumVersion"},
            "X-OpenStack-Ironic-API-Maximum-Version": {"$ref": "#/components/headers/MaximumVersion"},
            versions.LEGACY_HEADER: {"$ref": "#/components/headers/ServedVersion"},
            STANDARD_HEADER: {"$ref": "#/components/headers/ServedStandardVersion"},
        }
        if etag and self.etags:
            out_headers[ETAG_HEADER] = {"$ref": "#/components/headers/ETag"}
        if location:
            out_headers["Location"] = {"$ref": "#/components/headers/Location"}
        if replay:
            out_headers[REPLAYED_HEADER] = {"$ref": "#/components/headers/IdempotentReplayed"}
        out_headers.update(headers or {})
        resp: dict[str, Any] = {"description": description, "headers": out_headers}
        if schema is not None:
            resp["content"] = {"application/json": {"schema": schema}}
        return resp

    def responses(
        self, ok: dict[int, dict[str, Any]], errors: Iterable[int], *, conditional: bool = False
    ) -> dict[str, Any]:
        out: dict[str, Any] = {str(status): resp for status, resp in ok.items()}
        statuses = set(errors)
        if conditional and self.etags:
            statuses.add(412)
        for status in sorted(statuses):
            out[str(status)] = {"$ref": f"#/components/responses/Error{status}"}
        return out

    def if_match(self, op: dict[str, Any]) -> dict[str, Any]:
        if self.etags:
            op.setdefault("parameters", []).append({"$ref": "#/components/parameters/IfMatch"})
        return op

    # -- schemas of one resource -----------------------------------------------------------------------

    def field_schema(self, decl: Resource, name: str) -> dict[str, Any]:
        props = decl.create_schema.get("properties", {})
        if name in decl.sublinks or name == "links":
            schema: dict[str, Any] = dict(LINKS)
        elif name in READ_ONLY_TYPES:
            schema = dict(READ_ONLY_TYPES[name])
        elif name in props:
            schema = copy.deepcopy(dict(props[name]))
            schema.pop("format", None)
            # the stored value may be the default of an absent field (null shown as {} / [] / false)
            default = serialize.default_for(name)
            if default is not None and "type" in schema:
                types = schema["type"] if isinstance(schema["type"], list) else [schema["type"]]
                kind = {dict: "object", list: "array", bool: "boolean", str: "string"}.get(type(default))
                if kind and kind not in types:
                    schema["type"] = [*types, kind]
        else:
            schema = {}
        schema["x-introduced-in"] = str(self.field_since(decl, name))
        return schema

    def resource_schemas(self, decl: Resource) -> tuple[str, str]:
        """Register ``<Kind>`` (every field of the version) and ``<Kind>Fields`` (a ?fields= subset)."""
        title = "".join(part.capitalize() for part in decl.kind.split("_"))
        if title in self.schemas:
            return title, f"{title}Fields"
        names = self.visible(decl, decl.fields.names)
        props = {n: self.field_schema(decl, n) for n in names}
        self.schemas[title] = {
            "type": "object",
            "properties": props,
            "required": names,
            "additionalProperties": False,
            "x-introduced-in": str(decl.since),
        }
        self.schemas[f"{title}Fields"] = {
            "type": "object",
            "description": f"A {decl.kind} as listed or selected with ?fields= (a subset of {title}).",
            "properties": {n: {"$ref": f"#/components/schemas/{title}/properties/{n}"} for n in names},
            "additionalProperties": False,
        }
        return title, f"{title}Fields"

    def list_schema(self, decl: Resource) -> dict[str, Any]:
        _full, partial = self.resource_schemas(decl)
        key = decl.list_key or decl.collection
        return {
            "type": "object",
            "properties": {
                key: {"type": "array", "items": {"$ref": f"#/components/schemas/{partial}"}},
                "next": {"type": "string", "description": "The next page (when this one is full)."},
            },
            "required": [key],
            "additionalProperties": False,
        }

    def create_body(self, decl: Resource) -> dict[str, Any]:
        schema = copy.deepcopy(dict(create_schema_at(decl, self.version)))
        props = schema.get("properties", {})
        for name in list(props):
            if (decl.fields.since(name) or versions.MIN_VERSION) > self.version:
                del props[name]
            else:
                props[name]["x-introduced-in"] = str(self.field_since(decl, name))
        if "required" in schema:
            schema["required"] = [r for r in schema["required"] if r in props]
        return schema

    def patch_body(self, decl: Resource) -> dict[str, Any]:
        names = self.visible(decl, decl.patchable)
        alternatives = "|".join(re.escape(n) for n in names)
        return {
            "type": "array",
            "description": "A JSON Patch (RFC 6902) naming the patchable fields of this version.",
            "items": {
                "type": "object",
                "properties": {
                    "op": {"type": "string", "enum": ["add", "replace", "remove"]},
                    "path": {"type": "string", "pattern": f"^/({alternatives})(/[\\w~\\-.:]+)*$"},
                    "value": {},
                },
                "required": ["op", "path"],
                "additionalProperties": False,
            },
        }

    def list_parameters(self, decl: Resource, *, detail_route: bool) -> list[dict[str, Any]]:
        params: list[dict[str, Any]] = []
        for name, since in decl.filters:
            since = max(since, decl.since)
            if since <= self.version:
                schema: dict[str, Any] = filter_schema(decl.collection, name)
                if name.endswith("_uuid"):
                    schema = {"type": "string", "pattern": UUID_PATTERN}
                param = self.query(name, schema, since, f"Filter by {name}.")
                if schema.get("type") == "array":
                    param.update({"style": "form", "explode": False})
                params.append(param)
        for name, since in decl.bool_filters:
            if since <= self.version:
                params.append(self.query(name, {"type": "boolean"}, since, f"Filter by {name}."))
        params.extend(self.fields_parameter(decl))
        if not detail_route and decl.detail_since is not None:
            since = max(decl.detail_since, decl.since)
            if since <= self.version:
                params.append(self.query("detail", {"type": "boolean"}, since, "Show every field."))
        params.append(self.query("limit", {"type": "integer", "minimum": 1, "maximum": 999_999_999}))
        params.append(self.query("marker", {"type": "string"}, description="The last UUID of the page."))
        sort_keys = ["id", *self.visible(decl, decl.sort_keys)]
        params.append(self.query("sort_key", {"type": "string", "enum": sort_keys}))
        params.append(self.query("sort_dir", {"type": "string", "enum": ["asc", "desc"]}))
        return params

    def fields_parameter(self, decl: Resource) -> list[dict[str, Any]]:
        since = max(versions.FIELDS_SELECTOR, decl.since)
        if since > self.version:
            return []
        names = self.visible(decl, decl.fields.names)
        param = self.query(
            "fields",
            {"type": "array", "items": {"type": "string", "enum": names}, "minItems": 1, "uniqueItems": True},
            since,
            "The fields to show (links are always shown).",
        )
        param.update({"style": "form", "explode": False})
        return [param]

    def query(
        self,
        name: str,
        schema: dict[str, Any],
        since: Version = versions.MIN_VERSION,
        description: str = "",
    ) -> dict[str, Any]:
        out: dict[str, Any] = {"name": name, "in": "query", "required": False, "schema": schema}
        if description:
            out["description"] = description
        out["x-introduced-in"] = str(since)
        return out

    # -- paths of one resource -----------------------------------------------------------------------

    def resource_paths(self, decl: Resource) -> None:
        if decl.since > self.version:
            return
        full, partial = self.resource_schemas(decl)
        base = f"/v1/{decl.collection}"
        item = f"{base}/{{{decl.kind}_ident}}"
        tag = decl.collection
        self.add(base, "get", {
            "tags": [tag], "operationId": f"list_{decl.kind}",
            "summary": f"List {decl.collection}",
            "parameters": self.list_parameters(decl, detail_route=False),
            "responses": self.responses({200: self.response(200, "The list", self.list_schema(decl))},
                                        READ_ERRORS),
        }, decl.since)  # fmt: skip
        self.add(f"{base}/detail", "get", {
            "tags": [tag], "operationId": f"list_{decl.kind}_detail",
            "summary": f"List {decl.collection} with every field",
            "parameters": [p for p in self.list_parameters(decl, detail_route=True) if p["name"] != "fields"],
            "responses": self.responses({200: self.response(200, "The list", self.list_schema(decl))},
                                        READ_ERRORS),
        }, decl.since)  # fmt: skip
        ref = {"$ref": f"#/components/schemas/{full}"}
        self.add(base, "post", {
            "tags": [tag], "operationId": f"create_{decl.kind}", "summary": f"Create a {decl.kind}",
            "parameters": [{"$ref": "#/components/parameters/ClientToken"}],
            "requestBody": {"required": True,
                            "content": {"application/json": {"schema": self.create_body(decl)}}},
            "responses": self.responses(
                {201: self.response(201, "Created (or the first answer, replayed)", ref, etag=True,
                                    location=True, replay=True)},
                WRITE_ERRORS),
        }, decl.since)  # fmt: skip
        self.add(item, "get", {
            "tags": [tag], "operationId": f"get_{decl.kind}", "summary": f"Show a {decl.kind}",
            "parameters": self.fields_parameter(decl),
            "responses": self.responses(
                {200: self.response(200, "The resource", {"$ref": f"#/components/schemas/{partial}"},
                                    etag=True)},
                READ_ERRORS),
        }, decl.since)  # fmt: skip
        self.add(item, "patch", self.if_match({
            "tags": [tag], "operationId": f"update_{decl.kind}", "summary": f"Update a {decl.kind}",
            "requestBody": {"required": True,
                            "content": {"application/json": {"schema": self.patch_body(decl)}}},
            "responses": self.responses({200: self.response(200, "Updated", ref, etag=True)},
                                        WRITE_ERRORS, conditional=True),
        }), max(decl.since, OPERATION_SINCE.get((decl.collection, "patch"), decl.since)))  # fmt: skip
        self.add(item, "delete", self.if_match({
            "tags": [tag], "operationId": f"delete_{decl.kind}", "summary": f"Delete a {decl.kind}",
            "responses": self.responses({204: self.response(204, "Deleted")},
                                        (400, 403, 404, 406, 409), conditional=True),
        }), decl.since)  # fmt: skip

    def sub_collections(self, parent: Resource) -> None:
        """``/v1/<parent>/{ident}/<sublink>``: the parent's lists of another resource."""
        for sub in parent.sublinks:
            for child in self.decls.values():
                if child is parent or not (child.collection == sub or child.collection.startswith(sub + "/")):
                    continue
                since = max(parent.since, child.since, parent.fields.since(sub) or versions.MIN_VERSION,
                            OPERATION_SINCE.get((parent.collection, f"sub:{sub}"), versions.MIN_VERSION))
                path = f"/v1/{parent.collection}/{{{parent.kind}_ident}}/{child.collection}"
                for suffix, detail in (("", False), ("/detail", True)):
                    params = self.list_parameters(child, detail_route=detail)
                    if detail:
                        params = [p for p in params if p["name"] != "fields"]
                    self.add(path + suffix, "get", {
                        "tags": [parent.collection],
                        "operationId": f"list_{parent.kind}_{child.kind}{'_detail' if detail else ''}",
                        "summary": f"List the {child.collection} of a {parent.kind}",
                        "parameters": params,
                        "responses": self.responses(
                            {200: self.response(200, "The list", self.list_schema(child))}, READ_ERRORS),
                    }, since)  # fmt: skip

    # -- node actions and the rest -------------------------------------------------------------------

