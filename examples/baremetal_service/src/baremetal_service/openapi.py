"""An OpenAPI 3.1 document of the bare-metal API, for any microversion.

    document(Version(1, 52)) -> dict (JSON-ready)

The source of truth is the resource declarations
(``baremetal_service.api.resources.declarations()``, each with ``kind``, ``collection``,
``field_versions``, ``fields``, ``list_fields``, ``create_schema``, ``patchable``,
``sort_keys``, ``since``, ``filters``, ``list_key``, ``sublinks``) and the node's own tables
(``api/versions.py``, ``api/serialize.py``, ``api/schemas.py``, ``api/nodes.py``).  At a
version V the document holds exactly what V serves:

* a resource's paths from its ``since``; a field from its version in ``field_versions``
  (absent from every schema below it); filters from theirs; ``fields`` from 1.8,
  ``detail`` from 1.43;
* request bodies: the create schema (fields of V only) and PATCH as a JSON Patch array
  naming the patchable fields of V;
* responses: one resource (every field of V, ``additionalProperties: false``), a list
  (``{<collection>: [...], "next": url}``), Ironic's error body for 400/403/404/406/409/
  412/413/415 (``{"error_message": "<JSON string>"}`` plus apimw's ``errors`` list);
* headers: the microversion headers on requests and responses, ``ETag`` and the ``etag``
  field from 1.116 with ``If-Match`` (412), ``X-Client-Token`` on creates (409, replay).

Each field, parameter and operation carries ``x-introduced-in`` (the version it appeared
in).  Only operations the Flask router really serves are documented (the router is
consulted for the optional ``/detail`` lists and sub-collections).
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, Final

from apimw import Version

from .api import schemas, serialize, versions
from .api.resources import declarations

__all__ = ["OPENAPI_VERSION", "document", "document_json", "parse_version", "versions_documented"]

OPENAPI_VERSION: Final = "3.1.0"
LEGACY_HEADER: Final = "X-OpenStack-Ironic-API-Version"
STANDARD_HEADER: Final = "OpenStack-API-Version"
ERROR_STATUSES: Final = (400, 403, 404, 406, 409, 412, 413, 415)
_READ_ERRORS: Final = (400, 403, 404, 406)
_WRITE_ERRORS: Final = (400, 403, 404, 406, 409, 413, 415)

# -- field types that no create schema states (read-only fields) -------------------------------------

_LINK: Final = {
    "type": "object",
    "properties": {"href": {"type": "string"}, "rel": {"type": "string"}, "type": {"type": "string"}},
    "required": ["href", "rel"],
}
_LINKS: Final = {"type": "array", "items": {"$ref": "#/components/schemas/Link"}}
_STR_OR_NULL: Final = {"type": ["string", "null"]}
_OBJECT: Final = {"type": "object"}
_OBJECT_OR_NULL: Final = {"type": ["object", "null"]}
_STRINGS: Final = {"type": "array", "items": {"type": "string"}}
_TIME: Final = {"type": ["string", "null"]}
_UUID_PATTERN: Final = "^[0-9a-fA-F]{8}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{12}$"

#: Response types of fields no create schema declares (by name, for every resource).
READ_ONLY_TYPES: Final[dict[str, dict[str, Any]]] = {
    "uuid": {"type": "string", "pattern": _UUID_PATTERN},
    "created_at": _TIME,
    "updated_at": _TIME,
    "links": _LINKS,
    "etag": {"type": "string", "minLength": 1},
    "internal_info": _OBJECT,
    "driver_internal_info": _OBJECT,
    "clean_step": _OBJECT,
    "deploy_step": _OBJECT,
    "service_step": _OBJECT,
    "raid_config": _OBJECT,
    "target_raid_config": _OBJECT,
    "console_enabled": {"type": "boolean"},
    "power_state": _STR_OR_NULL,
    "target_power_state": _STR_OR_NULL,
    "provision_state": _STR_OR_NULL,
    "target_provision_state": _STR_OR_NULL,
    "provision_updated_at": _TIME,
    "inspection_started_at": _TIME,
    "inspection_finished_at": _TIME,
    "last_error": _STR_OR_NULL,
    "reservation": _STR_OR_NULL,
    "fault": _STR_OR_NULL,
    "conductor": _STR_OR_NULL,
    "allocation_uuid": _STR_OR_NULL,
    "boot_mode": _STR_OR_NULL,
    "secure_boot": {"type": ["boolean", "null"]},
    "health": _STR_OR_NULL,
    "traits": _STRINGS,
    "dynamic_portgroup": {"type": "boolean"},
    "state": {"type": "string"},
    "node_uuid": _STR_OR_NULL,
    "candidate_nodes": _STRINGS,
}

#: Operations served later than their resource (Ironic's numbers): (collection, operation) -> version.
OPERATION_SINCE: Final[dict[tuple[str, str], Version]] = {
    ("allocations", "patch"): versions.ALLOCATION_UPDATE,
    ("portgroups", "sub:ports"): versions.PORTGROUPS_SUBCONTROLLERS,
    ("nodes", "sub:portgroups"): versions.PORTGROUPS_SUBCONTROLLERS,
}


def _filter_schema(collection: str, name: str) -> dict[str, Any]:
    """The query schema of a list filter: the values the node list checks, or any string."""
    if collection == "nodes":
        from .api import nodes

        if name == "provision_state":
            return {"type": "string", "enum": sorted(nodes.PROVISION_STATES)}
        if name == "fault":
            return {"type": "string", "enum": list(nodes.FAULTS)}
        if name == "shard":  # a comma-separated list: any of them
            return {"type": "array", "items": {"type": "string"}, "minItems": 1}
    return {"type": "string"}


def _create_schema(decl: _Decl, version: Version) -> Mapping[str, Any]:
    """The create body a version checks (a declaration states the newest one)."""
    if decl.collection == "runbooks" and version < versions.RUNBOOK_TRAITS:
        from .api.collections_a_schemas import RUNBOOK_CREATE

        return RUNBOOK_CREATE  # before 1.112 the name is a trait (the service checks it so)
    return decl.create_schema


def _raid_config() -> Version:
    from .api.drivers import RAID_CONFIG

    return RAID_CONFIG


def _events_schema() -> dict[str, Any]:
    from .api.node_management import _EVENTS_SCHEMA

    return copy.deepcopy(_EVENTS_SCHEMA)


@dataclass(frozen=True)
class _Decl:
    """The attributes of a resource declaration the generator reads (nodes are built from tables)."""

    kind: str
    collection: str
    field_versions: Mapping[str, Version]
    fields: tuple[str, ...]
    list_fields: tuple[str, ...]
    create_schema: Mapping[str, Any]
    patchable: tuple[str, ...]
    sort_keys: tuple[str, ...]
    since: Version = versions.MIN_VERSION
    filters: tuple[tuple[str, Version], ...] = ()
    list_key: str = ""
    sublinks: tuple[str, ...] = ()
    bool_filters: tuple[tuple[str, Version], ...] = field(default=())
    #: ``?detail=`` on the list from this version (volume lists: 1.32)
    detail_since: Version = versions.DETAIL_QUERY


def _node_decl() -> _Decl:
    from .api import nodes

    return _Decl(
        kind="node",
        collection="nodes",
        field_versions=versions.NODE_FIELD_VERSIONS,
        fields=serialize.NODE_FIELDS,
        list_fields=serialize.NODE_LIST_FIELDS,
        create_schema=schemas.NODE_CREATE,
        patchable=nodes.PATCHABLE,
        sort_keys=nodes.SORT_KEYS,
        filters=(
            *nodes._FILTERS,
            ("chassis_uuid", versions.MIN_VERSION),
            ("instance_uuid", versions.MIN_VERSION),
        ),
        sublinks=tuple(sorted(serialize.NODE_SUBLINKS)),
        bool_filters=tuple(nodes._FLAGS),
    )


def _as_decl(res: Any) -> _Decl:
    return _Decl(
        kind=res.kind,
        collection=res.collection,
        field_versions=res.field_versions,
        fields=tuple(res.fields),
        list_fields=tuple(res.list_fields),
        create_schema=res.create_schema,
        patchable=tuple(res.patchable),
        sort_keys=tuple(res.sort_keys),
        since=res.since,
        filters=tuple(res.filters),
        list_key=res.list_key,
        sublinks=tuple(res.sublinks),
        detail_since=getattr(res, "detail_since", versions.DETAIL_QUERY),
    )


def _decls() -> tuple[_Decl, ...]:
    # Resources with their own controller (nodes, conductors) are documented from their
    # controller's tables (_node_decl) or by hand below, not as generic CRUD.
    return (_node_decl(), *(_as_decl(r) for r in declarations() if not getattr(r, "own_controller", False)))


# -- versions ------------------------------------------------------------------------------------------


def parse_version(text: str) -> Version:
    """``"1.52"`` or ``"latest"`` -> a Version within the served range (ValueError otherwise)."""
    value = text.strip()
    if value.lower() == "latest":
        return versions.MAX_VERSION
    match = re.fullmatch(r"(\d{1,3})\.(\d{1,4})", value)
    if not match:
        raise ValueError(f"not a microversion: {text!r} (expected MAJOR.MINOR or 'latest')")
    version = Version(int(match.group(1)), int(match.group(2)))
    if not versions.MIN_VERSION <= version <= versions.MAX_VERSION:
        raise ValueError(
            f"version {version} is outside the served range [{versions.MIN_VERSION}, {versions.MAX_VERSION}]"
        )
    return version


def versions_documented() -> tuple[Version, ...]:
    """The versions that change something (the history), for tests and tooling."""
    return tuple(v for v, _ in versions.HISTORY)


# -- the router -----------------------------------------------------------------------------------------


@lru_cache(maxsize=1)
def _routes() -> frozenset[tuple[str, str]]:
    """(path template with every parameter as ``{}``, method) for each route Flask serves."""
    from .api import create_flask_app

    app = create_flask_app(None)
    out: set[tuple[str, str]] = set()
    for rule in app.url_map.iter_rules():
        templates = [rule.rule]
        alternatives = re.search(r"<any\(([^)]*)\):\w+>", rule.rule)
        if alternatives:
            templates = [
                rule.rule.replace(alternatives.group(0), name.strip())
                for name in alternatives.group(1).split(",")
            ]
        for template in templates:
            normal = re.sub(r"<[^>]+>", "{}", template).rstrip("/") or "/"
            for method in rule.methods or ():
                out.add((normal, method.lower()))
    return frozenset(out)


def _routed(path: str, method: str) -> bool:
    normal = re.sub(r"\{[^}]+\}", "{}", path).rstrip("/") or "/"
    return (normal, method) in _routes()


# -- the document ---------------------------------------------------------------------------------------


def document(version: Version) -> dict[str, Any]:
    """The OpenAPI 3.1 document of the API served at *version* (a fresh copy each call)."""
    return copy.deepcopy(_document(version))


def document_json(version: Version) -> bytes:
    """:func:`document` serialized (cached per version: the service answers it often)."""
    return _document_json(version)


@lru_cache(maxsize=256)
def _document_json(version: Version) -> bytes:
    return json.dumps(_document(version), sort_keys=False).encode("utf-8")


@lru_cache(maxsize=256)
def _document(version: Version) -> dict[str, Any]:
    return _Builder(version).build()


def _v(version: Version) -> str:
    return str(version)


class _Builder:
    def __init__(self, version: Version) -> None:
        self.version = version
        self.etags = version >= versions.ETAG_VERSION
        self.paths: dict[str, dict[str, Any]] = {}
        self.schemas: dict[str, Any] = {}
        self.decls = {d.collection: d for d in _decls()}

    # -- helpers -----------------------------------------------------------------------------------

    def visible(self, decl: _Decl, names: Iterable[str]) -> list[str]:
        return [n for n in names if self.field_since(decl, n) <= self.version]

    def field_since(self, decl: _Decl, name: str) -> Version:
        return max(decl.field_versions.get(name, versions.MIN_VERSION), decl.since)

    def add(self, path: str, method: str, op: dict[str, Any], since: Version = versions.MIN_VERSION) -> None:
        if since > self.version or not _routed(path, method):
            return
        op.setdefault("x-introduced-in", _v(since))
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
            LEGACY_HEADER: {"$ref": "#/components/headers/ServedVersion"},
            STANDARD_HEADER: {"$ref": "#/components/headers/ServedStandardVersion"},
        }
        if etag and self.etags:
            out_headers["ETag"] = {"$ref": "#/components/headers/ETag"}
        if location:
            out_headers["Location"] = {"$ref": "#/components/headers/Location"}
        if replay:
            out_headers["Idempotent-Replayed"] = {"$ref": "#/components/headers/IdempotentReplayed"}
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

    def field_schema(self, decl: _Decl, name: str) -> dict[str, Any]:
        props = decl.create_schema.get("properties", {})
        if name in decl.sublinks or name == "links":
            schema: dict[str, Any] = dict(_LINKS)
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
        schema["x-introduced-in"] = _v(self.field_since(decl, name))
        return schema

    def resource_schemas(self, decl: _Decl) -> tuple[str, str]:
        """Register ``<Kind>`` (every field of the version) and ``<Kind>Fields`` (a ?fields= subset)."""
        title = "".join(part.capitalize() for part in decl.kind.split("_"))
        if title in self.schemas:
            return title, f"{title}Fields"
        names = self.visible(decl, decl.fields)
        props = {n: self.field_schema(decl, n) for n in names}
        self.schemas[title] = {
            "type": "object",
            "properties": props,
            "required": names,
            "additionalProperties": False,
            "x-introduced-in": _v(decl.since),
        }
        self.schemas[f"{title}Fields"] = {
            "type": "object",
            "description": f"A {decl.kind} as listed or selected with ?fields= (a subset of {title}).",
            "properties": {n: {"$ref": f"#/components/schemas/{title}/properties/{n}"} for n in names},
            "additionalProperties": False,
        }
        return title, f"{title}Fields"

    def list_schema(self, decl: _Decl) -> dict[str, Any]:
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

    def create_body(self, decl: _Decl) -> dict[str, Any]:
        schema = copy.deepcopy(dict(_create_schema(decl, self.version)))
        props = schema.get("properties", {})
        for name in list(props):
            if decl.field_versions.get(name, versions.MIN_VERSION) > self.version:
                del props[name]
            else:
                props[name]["x-introduced-in"] = _v(self.field_since(decl, name))
        if "required" in schema:
            schema["required"] = [r for r in schema["required"] if r in props]
        return schema

    def patch_body(self, decl: _Decl) -> dict[str, Any]:
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

    def list_parameters(self, decl: _Decl, *, detail_route: bool) -> list[dict[str, Any]]:
        params: list[dict[str, Any]] = []
        for name, since in decl.filters:
            since = max(since, decl.since)
            if since <= self.version:
                schema: dict[str, Any] = _filter_schema(decl.collection, name)
                if name.endswith("_uuid"):
                    schema = {"type": "string", "pattern": _UUID_PATTERN}
                param = self.query(name, schema, since, f"Filter by {name}.")
                if schema.get("type") == "array":
                    param.update({"style": "form", "explode": False})
                params.append(param)
        for name, since in decl.bool_filters:
            if since <= self.version:
                params.append(self.query(name, {"type": "boolean"}, since, f"Filter by {name}."))
        params.extend(self.fields_parameter(decl))
        if not detail_route:
            since = max(decl.detail_since, decl.since)
            if since <= self.version:
                params.append(self.query("detail", {"type": "boolean"}, since, "Show every field."))
        params.append(self.query("limit", {"type": "integer", "minimum": 1, "maximum": 999_999_999}))
        params.append(self.query("marker", {"type": "string"}, description="The last UUID of the page."))
        sort_keys = ["id", *self.visible(decl, decl.sort_keys)]
        params.append(self.query("sort_key", {"type": "string", "enum": sort_keys}))
        params.append(self.query("sort_dir", {"type": "string", "enum": ["asc", "desc"]}))
        return params

    def fields_parameter(self, decl: _Decl) -> list[dict[str, Any]]:
        since = max(versions.FIELDS_SELECTOR, decl.since)
        if since > self.version:
            return []
        names = self.visible(decl, decl.fields)
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
        out["x-introduced-in"] = _v(since)
        return out

    # -- paths of one resource -----------------------------------------------------------------------

    def resource_paths(self, decl: _Decl) -> None:
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
                                        _READ_ERRORS),
        }, decl.since)  # fmt: skip
        self.add(f"{base}/detail", "get", {
            "tags": [tag], "operationId": f"list_{decl.kind}_detail",
            "summary": f"List {decl.collection} with every field",
            "parameters": [p for p in self.list_parameters(decl, detail_route=True) if p["name"] != "fields"],
            "responses": self.responses({200: self.response(200, "The list", self.list_schema(decl))},
                                        _READ_ERRORS),
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
                _WRITE_ERRORS),
        }, decl.since)  # fmt: skip
        self.add(item, "get", {
            "tags": [tag], "operationId": f"get_{decl.kind}", "summary": f"Show a {decl.kind}",
            "parameters": self.fields_parameter(decl),
            "responses": self.responses(
                {200: self.response(200, "The resource", {"$ref": f"#/components/schemas/{partial}"},
                                    etag=True)},
                _READ_ERRORS),
        }, decl.since)  # fmt: skip
        self.add(item, "patch", self.if_match({
            "tags": [tag], "operationId": f"update_{decl.kind}", "summary": f"Update a {decl.kind}",
            "requestBody": {"required": True,
                            "content": {"application/json": {"schema": self.patch_body(decl)}}},
            "responses": self.responses({200: self.response(200, "Updated", ref, etag=True)},
                                        _WRITE_ERRORS, conditional=True),
        }), max(decl.since, OPERATION_SINCE.get((decl.collection, "patch"), decl.since)))  # fmt: skip
        self.add(item, "delete", self.if_match({
            "tags": [tag], "operationId": f"delete_{decl.kind}", "summary": f"Delete a {decl.kind}",
            "responses": self.responses({204: self.response(204, "Deleted")},
                                        (400, 403, 404, 406, 409), conditional=True),
        }), decl.since)  # fmt: skip

    def sub_collections(self, parent: _Decl) -> None:
        """``/v1/<parent>/{ident}/<sublink>``: the parent's lists of another resource."""
        for sub in parent.sublinks:
            for child in self.decls.values():
                if child is parent or not (child.collection == sub or child.collection.startswith(sub + "/")):
                    continue
                since = max(parent.since, child.since, parent.field_versions.get(sub, versions.MIN_VERSION),
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
                            {200: self.response(200, "The list", self.list_schema(child))}, _READ_ERRORS),
                    }, since)  # fmt: skip

    # -- node actions and the rest -------------------------------------------------------------------

    def node_paths(self) -> None:
        node = self.decls["nodes"]
        item = "/v1/nodes/{node_ident}"
        empty = {202: self.response(202, "Accepted", location=True)}
        states = self.visible(node, serialize.NODE_STATE_FIELDS)
        self.add(f"{item}/states", "get", {
            "tags": ["nodes"], "operationId": "get_node_states",
            "responses": self.responses({200: self.response(200, "The state fields", {
                "type": "object",
                "properties": {n: self.field_schema(node, n) for n in states},
                "required": states, "additionalProperties": False})}, _READ_ERRORS),
        })  # fmt: skip
        verbs = ["active", "deleted", "rebuild", "inspect", "manage", "provide", "abort", "clean", "adopt",
                 "rescue", "unrescue", "deploy", "undeploy"]  # fmt: skip
        provision = copy.deepcopy(schemas.PROVISION)
        provision["properties"]["target"] = {
            "type": "string",
            "enum": [v for v in verbs if versions.VERB_VERSIONS.get(v, versions.MIN_VERSION) <= self.version],
        }
        self.add(f"{item}/states/provision", "put", self.if_match({
            "tags": ["nodes"], "operationId": "set_node_provision_state",
            "requestBody": {"required": True, "content": {"application/json": {"schema": provision}}},
            "responses": self.responses(empty, _WRITE_ERRORS, conditional=True),
        }))  # fmt: skip
        power = copy.deepcopy(schemas.POWER)
        targets = ["power on", "power off", "rebooting"]
        if self.version >= versions.SOFT_POWER_OFF:
            targets += ["soft power off", "soft rebooting"]
        else:
            del power["properties"]["timeout"]
        power["properties"]["target"] = {"type": "string", "enum": targets}
        self.add(f"{item}/states/power", "put", self.if_match({
            "tags": ["nodes"], "operationId": "set_node_power_state",
            "requestBody": {"required": True, "content": {"application/json": {"schema": power}}},
            "responses": self.responses(empty, _WRITE_ERRORS, conditional=True),
        }))  # fmt: skip
        self.add(f"{item}/validate", "get", {
            "tags": ["nodes"], "operationId": "validate_node",
            "responses": self.responses({200: self.response(200, "Interface checks", _OBJECT)}, _READ_ERRORS),
        })  # fmt: skip
        accepted = {202: self.response(202, "Accepted")}
        self.add(f"{item}/maintenance", "put", self.if_match({
            "tags": ["nodes"], "operationId": "set_node_maintenance",
            "requestBody": {"required": False,
                            "content": {"application/json": {"schema": copy.deepcopy(schemas.MAINTENANCE)}}},
            "responses": self.responses(accepted, _WRITE_ERRORS, conditional=True),
        }))  # fmt: skip
        self.add(f"{item}/maintenance", "delete", self.if_match({
            "tags": ["nodes"], "operationId": "unset_node_maintenance",
            "responses": self.responses(accepted, _WRITE_ERRORS, conditional=True),
        }))  # fmt: skip
        self.feature_paths(item)
        self.management_paths(item)
        self.history_paths(item)

    def management_paths(self, item: str) -> None:
        """Node management through the node's driver (api/node_management.py)."""
        from .api import node_management as nm

        def obj(props: dict[str, Any], required: Iterable[str] | None = None) -> dict[str, Any]:
            return {"type": "object", "properties": props, "additionalProperties": False,
                    "required": list(props if required is None else required)}  # fmt: skip

        def body(schema: Mapping[str, Any], required: bool = True) -> dict[str, Any]:
            content = {"application/json": {"schema": copy.deepcopy(dict(schema))}}
            return {"required": required, "content": content}

        no_content = {204: self.response(204, "Done")}
        self.add(f"{item}/management/boot_device", "get", {
            "tags": ["nodes"], "operationId": "get_node_boot_device",
            "responses": self.responses({200: self.response(200, "The boot device (null when unknown)", obj({
                "boot_device": _STR_OR_NULL, "persistent": {"type": ["boolean", "null"]}}))}, _READ_ERRORS),
        })  # fmt: skip
        self.add(f"{item}/management/boot_device", "put", self.if_match({
            "tags": ["nodes"], "operationId": "set_node_boot_device",
            "description": "400 when the device is not one of the supported ones.",
            "requestBody": body(nm._BOOT_DEVICE_SCHEMA),
            "responses": self.responses(no_content, _WRITE_ERRORS, conditional=True),
        }))  # fmt: skip
        self.add(f"{item}/management/boot_device/supported", "get", {
            "tags": ["nodes"], "operationId": "list_node_supported_boot_devices",
            "responses": self.responses({200: self.response(200, "The supported boot devices", obj({
                "supported_boot_devices": _STRINGS}))}, _READ_ERRORS),
        })  # fmt: skip
        indicator = obj({"name": {"type": "string", "pattern": "^[^@]+@[^@]+$"},
                         "component": {"type": "string"}, "readonly": {"type": "boolean"},
                         "states": _STRINGS, "links": _LINKS})  # fmt: skip
        self.add(f"{item}/management/indicators", "get", {
            "tags": ["nodes"], "operationId": "list_node_indicators",
            "responses": self.responses({200: self.response(200, "The indicators (name@component)", obj({
                "indicators": {"type": "array", "items": indicator}}))}, _READ_ERRORS),
        })  # fmt: skip
        self.add(f"{item}/management/indicators/{{indicator}}", "get", {
            "tags": ["nodes"], "operationId": "get_node_indicator",
            "description": "The indicator is `name@component` (400 when malformed or unknown).",
            "responses": self.responses({200: self.response(200, "Its state", obj({
                "state": {"type": "string", "enum": ["on", "off", "blinking", "unknown"]}}))}, _READ_ERRORS),
        })  # fmt: skip
        self.add(f"{item}/management/indicators/{{indicator}}", "put", {
            "tags": ["nodes"], "operationId": "set_node_indicator",
            "description": "400 when the driver cannot set it (fake-hardware sets none).",
            "requestBody": body(obj({"state": {"type": "string"}})),
            "responses": self.responses(no_content, _WRITE_ERRORS),
        })  # fmt: skip
        self.add(f"{item}/bios", "get", {
            "tags": ["nodes"], "operationId": "list_node_bios",
            "responses": self.responses({200: self.response(200, "The cached BIOS settings", obj({
                "bios": {"type": "array", "items": _OBJECT}}))}, _READ_ERRORS),
        }, nm.BIOS)  # fmt: skip
        self.add(f"{item}/children", "get", {
            "tags": ["nodes"], "operationId": "list_node_children",
            "responses": self.responses({200: self.response(200, "The child nodes' UUIDs", obj({
                "children": {"type": "array", "items": {"type": "string", "pattern": _UUID_PATTERN}},
                "links": {"$ref": "#/components/schemas/Link"}}))}, _READ_ERRORS),
        }, versions.PARENT_NODE)  # fmt: skip
        self.add(f"{item}/states/console", "get", {
            "tags": ["nodes"], "operationId": "get_node_console",
            "responses": self.responses({200: self.response(200, "The console state", obj({
                "console_enabled": {"type": "boolean"}, "console_info": _OBJECT_OR_NULL}))}, _READ_ERRORS),
        })  # fmt: skip
        self.add(f"{item}/states/console", "put", self.if_match({
            "tags": ["nodes"], "operationId": "set_node_console",
            "description": "`enabled`: a boolean or one of Ironic's boolean strings; 400 for a node "
                           "without a console interface.",
            "requestBody": body(obj({"enabled": {"type": ["boolean", "string"]}})),
            "responses": self.responses({202: self.response(202, "Accepted", location=True)}, _WRITE_ERRORS,
                                        conditional=True),
        }))  # fmt: skip
        self.add(f"{item}/states/raid", "put", self.if_match({
            "tags": ["nodes"], "operationId": "set_node_target_raid_config",
            "description": "The target RAID configuration, validated by the driver (Ironic's RAID schema, "
                           "one root volume at most); `{}` clears it; 404 for a node without a RAID "
                           "interface.",
            "requestBody": body({"type": "object", "properties": {
                "logical_disks": {"type": "array", "items": _OBJECT}}}),
            "responses": self.responses(no_content, _WRITE_ERRORS, conditional=True),
        }), nm.RAID)  # fmt: skip
        method_info = obj({"http_methods": _STRINGS, "async": {"type": "boolean"},
                           "description": {"type": "string"}, "attach": {"type": "boolean"},
                           "require_exclusive_lock": {"type": "boolean"}})  # fmt: skip
        self.add(f"{item}/vendor_passthru/methods", "get", {
            "tags": ["nodes"], "operationId": "list_node_vendor_methods",
            "responses": self.responses({200: self.response(200, "The vendor methods by name", {
                "type": "object", "additionalProperties": method_info})}, _READ_ERRORS),
        })  # fmt: skip
        for method in ("get", "post", "put", "patch", "delete"):
            op: dict[str, Any] = {
                "tags": ["nodes"], "operationId": f"node_vendor_passthru_{method}",
                "description": "Calls a vendor method: a synchronous one answers 200 with its return "
                               "value, an asynchronous one 202; 400 for an unknown method or HTTP verb.",
                "parameters": [self.query("method", {"type": "string", "minLength": 1})],
                "responses": self.responses({
                    200: self.response(200, "The method's return value", {}),
                    202: self.response(202, "Accepted (asynchronous method)")}, _WRITE_ERRORS),
            }  # fmt: skip
            op["parameters"][0]["required"] = True
            if method != "get":
                op["requestBody"] = body({"type": "object"}, required=False)
            self.add(f"{item}/vendor_passthru", method, op)

    def history_paths(self, item: str) -> None:
        """``/v1/nodes/{id}/history`` (api/node_history.py): fields by version."""
        from .db import history

        since = versions.NODE_HISTORY
        if since > self.version:
            return
        types: dict[str, dict[str, Any]] = {
            "uuid": {"type": "string", "pattern": _UUID_PATTERN}, "created_at": {"type": "string"},
            "severity": {"type": "string"}, "event_type": {"type": "string"}, "event": {"type": "string"},
            "duration_seconds": {"type": ["integer", "null"]},
        }  # fmt: skip
        later = {"project": versions.NODE_HISTORY_PROJECT, "state": versions.NODE_HISTORY_FIELDS,
                 "target_provision_state": versions.NODE_HISTORY_FIELDS,
                 "duration_seconds": versions.NODE_HISTORY_FIELDS}  # fmt: skip
        names = [n for n in history.FIELDS if later.get(n, since) <= self.version]
        props: dict[str, Any] = {
            n: {**types.get(n, _STR_OR_NULL), "x-introduced-in": _v(later.get(n, since))} for n in names
        }
        props["links"] = _LINKS
        self.schemas["NodeHistoryEvent"] = {
            "type": "object", "properties": props, "required": [*names, "links"],
            "additionalProperties": False, "x-introduced-in": _v(since),
        }  # fmt: skip
        self.schemas["NodeHistoryListed"] = {
            "type": "object",
            "description": "An entry as listed: uuid, created_at, severity, event (cut to 255 characters) "
                           "and links; every field with ?detail=true.",
            "properties": {n: {"$ref": f"#/components/schemas/NodeHistoryEvent/properties/{n}"}
                           for n in props},
            "required": ["uuid", "created_at", "severity", "event", "links"],
            "additionalProperties": False,
        }  # fmt: skip
        listed = {"type": "object", "properties": {
            "history": {"type": "array", "items": {"$ref": "#/components/schemas/NodeHistoryListed"}},
            "next": {"type": "string"}}, "required": ["history"], "additionalProperties": False}  # fmt: skip
        self.add(f"{item}/history", "get", {
            "tags": ["nodes"], "operationId": "list_node_history",
            "description": "Any other query parameter is 400 (Unexpected arguments).",
            "parameters": [
                self.query("detail", {"type": "boolean"}, since, "Show every field."),
                self.query("limit", {"type": "integer", "minimum": 1, "maximum": 999_999_999}, since),
                self.query("marker", {"type": "string"}, since, "The last UUID of the page."),
                self.query("sort_key", {"type": "string", "enum": list(history.FIELDS)}, since),
                self.query("sort_dir", {"type": "string", "enum": ["asc", "desc"]}, since),
            ],
            "responses": self.responses({200: self.response(200, "The node's history", listed)},
                                        _READ_ERRORS),
        }, since)  # fmt: skip
        self.add(f"{item}/history/{{event_uuid}}", "get", {
            "tags": ["nodes"], "operationId": "get_node_history_event",
            "responses": self.responses({200: self.response(200, "One entry", {
                "$ref": "#/components/schemas/NodeHistoryEvent"})}, _READ_ERRORS),
        }, since)  # fmt: skip

    def feature_paths(self, item: str) -> None:
        from .api import node_features

        no_content = {204: self.response(204, "Done", etag=False)}
        traits = versions.NODE_TRAITS
        self.add(f"{item}/traits", "get", {
            "tags": ["nodes"], "operationId": "list_node_traits",
            "responses": self.responses({200: self.response(200, "The traits", {
                "type": "object", "properties": {"traits": _STRINGS}, "required": ["traits"],
                "additionalProperties": False})}, _READ_ERRORS),
        }, traits)  # fmt: skip
        self.add(f"{item}/traits", "put", self.if_match({
            "tags": ["nodes"], "operationId": "set_node_traits",
            "requestBody": {"required": True, "content": {"application/json": {
                "schema": copy.deepcopy(node_features.TRAITS_BODY)}}},
            "responses": self.responses(no_content, _WRITE_ERRORS, conditional=True),
        }), traits)  # fmt: skip
        self.add(f"{item}/traits/{{trait}}", "put", self.if_match({
            "tags": ["nodes"], "operationId": "add_node_trait",
            "responses": self.responses({204: self.response(204, "Added", location=True)}, _WRITE_ERRORS,
                                        conditional=True),
        }), traits)  # fmt: skip
        for path, op_id in ((f"{item}/traits", "remove_node_traits"), (f"{item}/traits/{{trait}}",
                                                                          "remove_node_trait")):
            self.add(path, "delete", self.if_match({
                "tags": ["nodes"], "operationId": op_id,
                "responses": self.responses(no_content, _WRITE_ERRORS, conditional=True),
            }), traits)  # fmt: skip
        vifs = versions.NODE_VIFS
        self.add(f"{item}/vifs", "get", {
            "tags": ["nodes"], "operationId": "list_node_vifs",
            "responses": self.responses({200: self.response(200, "The VIFs", {
                "type": "object",
                "properties": {"vifs": {"type": "array", "items": {
                    "type": "object", "properties": {"id": {"type": "string"}}, "required": ["id"]}}},
                "required": ["vifs"], "additionalProperties": False})}, _READ_ERRORS),
        }, vifs)  # fmt: skip
        vif_body = copy.deepcopy(node_features.VIF_BODY)
        self.add(f"{item}/vifs", "post", {
            "tags": ["nodes"], "operationId": "attach_node_vif",
            "requestBody": {"required": True, "content": {"application/json": {"schema": vif_body}}},
            "responses": self.responses(no_content, _WRITE_ERRORS),
        }, vifs)  # fmt: skip
        self.add(f"{item}/vifs/{{vif_id}}", "delete", {
            "tags": ["nodes"], "operationId": "detach_node_vif",
            "responses": self.responses(no_content, _WRITE_ERRORS),
        }, vifs)  # fmt: skip
        vmedia = versions.NODE_VMEDIA
        self.add(f"{item}/vmedia", "post", {
            "tags": ["nodes"], "operationId": "attach_node_vmedia",
            "requestBody": {"required": True, "content": {"application/json": {
                "schema": copy.deepcopy(node_features.VMEDIA_BODY)}}},
            "responses": self.responses(no_content, _WRITE_ERRORS),
        }, vmedia)  # fmt: skip
        self.add(f"{item}/vmedia", "delete", {
            "tags": ["nodes"], "operationId": "detach_node_vmedia",
            "parameters": [self.query("device_types", {"type": "string"}, vmedia)],
            "responses": self.responses(no_content, _WRITE_ERRORS),
        }, vmedia)  # fmt: skip
        self.add(f"{item}/firmware", "get", {
            "tags": ["nodes"], "operationId": "list_node_firmware",
            "responses": self.responses({200: self.response(200, "Firmware components", {
                "type": "object", "properties": {"firmware": {"type": "array", "items": _OBJECT}},
                "required": ["firmware"], "additionalProperties": False})}, _READ_ERRORS),
        }, versions.NODE_FIRMWARE)  # fmt: skip
        alloc = self.decls.get("allocations")
        if alloc is not None and alloc.since <= self.version:
            _full, partial = self.resource_schemas(alloc)
            self.add(f"{item}/allocation", "get", {
                "tags": ["nodes"], "operationId": "get_node_allocation",
                "parameters": self.fields_parameter(alloc),
                "responses": self.responses({200: self.response(
                    200, "The node's allocation", {"$ref": f"#/components/schemas/{partial}"}, etag=True)},
                    _READ_ERRORS),
            }, alloc.since)  # fmt: skip
            self.add(f"{item}/allocation", "delete", {
                "tags": ["nodes"], "operationId": "delete_node_allocation",
                "responses": self.responses(no_content, (400, 403, 404, 406, 409)),
            }, alloc.since)  # fmt: skip

    def discovery_paths(self) -> None:
        self.add("/", "get", {
            "tags": ["discovery"], "operationId": "root",
            "responses": self.responses({200: self.response(200, "The API versions", _OBJECT)}, (406,)),
        })  # fmt: skip
        self.add("/v1", "get", {
            "tags": ["discovery"], "operationId": "v1",
            "responses": self.responses({200: self.response(200, "The v1 resources", _OBJECT)}, (406,)),
        })  # fmt: skip
        self.add("/v1/openapi.json", "get", {
            "tags": ["discovery"], "operationId": "openapi",
            "summary": "This document, for the requested microversion",
            "responses": self.responses({200: self.response(200, "An OpenAPI document", _OBJECT)}, (406,)),
        })  # fmt: skip
        named = {"type": "object", "properties": {"links": _LINKS}}
        self.add("/v1/drivers", "get", {
            "tags": ["drivers"], "operationId": "list_drivers",
            "responses": self.responses({200: self.response(200, "The drivers", {
                "type": "object", "properties": {"drivers": {"type": "array", "items": named}},
                "required": ["drivers"]})}, _READ_ERRORS),
        })  # fmt: skip
        self.add("/v1/drivers/{driver_name}", "get", {
            "tags": ["drivers"], "operationId": "get_driver",
            "responses": self.responses({200: self.response(200, "A driver", named)}, _READ_ERRORS),
        })  # fmt: skip
        self.add("/v1/drivers/{driver_name}/properties", "get", {
            "tags": ["drivers"], "operationId": "get_driver_properties",
            "responses": self.responses({200: self.response(200, "Its properties", _OBJECT)}, _READ_ERRORS),
        })  # fmt: skip
        if self.version >= versions.VOLUME:
            names = ["links", "connectors", "targets"]
            index = {"type": "object", "properties": dict.fromkeys(names, _LINKS), "required": names,
                     "additionalProperties": False}  # fmt: skip
            self.add("/v1/volume", "get", {
                "tags": ["volume"], "operationId": "volume_index",
                "responses": self.responses({200: self.response(200, "Links", index)}, _READ_ERRORS),
            }, versions.VOLUME)  # fmt: skip
            self.add("/v1/nodes/{node_ident}/volume", "get", {
                "tags": ["nodes"], "operationId": "node_volume_index",
                "responses": self.responses({200: self.response(200, "Links", index)}, _READ_ERRORS),
            }, versions.VOLUME)  # fmt: skip
        conductor = {"type": "object", "properties": {
            "hostname": {"type": "string"}, "conductor_group": {"type": "string"},
            "alive": {"type": "boolean"},
            "drivers": _STRINGS, "created_at": _TIME, "updated_at": _TIME, "links": _LINKS},
            "additionalProperties": False}  # fmt: skip
        self.add("/v1/conductors", "get", {
            "tags": ["conductors"], "operationId": "list_conductors",
            "parameters": [self.query("detail", {"type": "boolean"}, versions.DETAIL_QUERY)]
            if self.version >= versions.DETAIL_QUERY else [],
            "responses": self.responses({200: self.response(200, "The conductors", {
                "type": "object", "properties": {"conductors": {"type": "array", "items": conductor},
                                                 "next": {"type": "string"}},
                "required": ["conductors"]})}, _READ_ERRORS),
        }, versions.CONDUCTORS)  # fmt: skip
        self.add("/v1/conductors/{hostname}", "get", {
            "tags": ["conductors"], "operationId": "get_conductor",
            "responses": self.responses({200: self.response(200, "A conductor", conductor)}, _READ_ERRORS),
        }, versions.CONDUCTORS)  # fmt: skip
        self.add("/v1/drivers/{driver_name}/raid/logical_disk_properties", "get", {
            "tags": ["drivers"], "operationId": "get_driver_raid_logical_disk_properties",
            "description": "404 for a driver without a RAID interface.",
            "responses": self.responses({200: self.response(200, "Property names and descriptions", {
                "type": "object", "additionalProperties": {"type": "string"}})}, _READ_ERRORS),
        }, _raid_config())  # fmt: skip
        self.add("/v1/shards", "get", {
            "tags": ["shards"], "operationId": "list_shards",
            "responses": self.responses({200: self.response(200, "Nodes per shard ('None': unsharded)", {
                "type": "object", "properties": {"shards": {"type": "array", "items": {
                    "type": "object", "properties": {"name": {"type": "string"},
                                                     "count": {"type": "integer", "minimum": 1}},
                    "required": ["name", "count"], "additionalProperties": False}}},
                "required": ["shards"], "additionalProperties": False})}, _READ_ERRORS),
        }, versions.SHARDS)  # fmt: skip
        self.add("/v1/events", "post", {
            "tags": ["events"], "operationId": "post_events",
            "summary": "External (network) events: checked, logged",
            "requestBody": {"required": True, "content": {"application/json": {
                "schema": _events_schema()}}},
            "responses": self.responses({204: self.response(204, "Accepted")}, (400, 403, 406, 413)),
        }, versions.EVENTS)  # fmt: skip
        self.resource_class_paths()
        self.runbook_trait_paths()

    def resource_class_paths(self) -> None:
        since = versions.RESOURCE_CLASS_VERSION
        rc = {"type": "object", "properties": {
            "name": {"type": "string", "pattern": schemas.RESOURCE_CLASS_NAME}, "created_at": _TIME,
            "updated_at": _TIME, "links": _LINKS},
            "required": ["name", "created_at", "updated_at", "links"],
            "additionalProperties": False}  # fmt: skip
        self.add("/v1/resource_classes", "get", {
            "tags": ["resource_classes"], "operationId": "list_resource_classes",
            "responses": self.responses({200: self.response(200, "The classes", {
                "type": "object", "properties": {"resource_classes": {"type": "array", "items": rc}},
                "required": ["resource_classes"], "additionalProperties": False})}, _READ_ERRORS),
        }, since)  # fmt: skip
        self.add("/v1/resource_classes", "post", {
            "tags": ["resource_classes"], "operationId": "create_resource_class",
            "parameters": [{"$ref": "#/components/parameters/ClientToken"}],
            "requestBody": {"required": True, "content": {"application/json": {
                "schema": copy.deepcopy(schemas.RESOURCE_CLASS_CREATE)}}},
            "responses": self.responses({201: self.response(201, "Created", rc, location=True, replay=True)},
                                        _WRITE_ERRORS),
        }, since)  # fmt: skip
        self.add("/v1/resource_classes/{resource_class}", "get", {
            "tags": ["resource_classes"], "operationId": "get_resource_class",
            "responses": self.responses({200: self.response(200, "A class", rc)}, _READ_ERRORS),
        }, since)  # fmt: skip
        self.add("/v1/resource_classes/{resource_class}", "put", self.if_match({
            "tags": ["resource_classes"], "operationId": "ensure_resource_class",
            "description": "Idempotent: no body; 201 when created, 204 when it already exists.",
            "responses": self.responses({201: self.response(201, "Created", location=True),
                                         204: self.response(204, "Exists")}, _WRITE_ERRORS, conditional=True),
        }), since)  # fmt: skip
        self.add("/v1/resource_classes/{resource_class}", "delete", self.if_match({
            "tags": ["resource_classes"], "operationId": "delete_resource_class",
            "responses": self.responses({204: self.response(204, "Deleted")}, _WRITE_ERRORS,
                                        conditional=True),
        }), since)  # fmt: skip

    def runbook_trait_paths(self) -> None:
        from .api.collections_a_schemas import RUNBOOK_TRAITS

        since = versions.RUNBOOK_TRAITS
        item = "/v1/runbooks/{runbook_ident}/traits"
        done = {204: self.response(204, "Done")}
        self.add(item, "get", {
            "tags": ["runbooks"], "operationId": "list_runbook_traits",
            "responses": self.responses({200: self.response(200, "The traits", {
                "type": "object", "properties": {"traits": _STRINGS}, "required": ["traits"],
                "additionalProperties": False})}, _READ_ERRORS),
        }, since)  # fmt: skip
        self.add(item, "put", self.if_match({
            "tags": ["runbooks"], "operationId": "set_runbook_traits",
            "requestBody": {"required": True, "content": {"application/json": {
                "schema": copy.deepcopy(RUNBOOK_TRAITS)}}},
            "responses": self.responses(done, _WRITE_ERRORS, conditional=True),
        }), since)  # fmt: skip
        self.add(item + "/{trait}", "put", self.if_match({
            "tags": ["runbooks"], "operationId": "add_runbook_trait",
            "responses": self.responses({204: self.response(204, "Added", location=True)}, _WRITE_ERRORS,
                                        conditional=True),
        }), since)  # fmt: skip
        for path, op_id in ((item, "remove_runbook_traits"), (item + "/{trait}", "remove_runbook_trait")):
            self.add(path, "delete", self.if_match({
                "tags": ["runbooks"], "operationId": op_id,
                "responses": self.responses(done, _WRITE_ERRORS, conditional=True),
            }), since)  # fmt: skip

    # -- components and the whole -------------------------------------------------------------------

    def components(self) -> dict[str, Any]:
        served = _v(self.version)
        version_header = {"type": "string", "pattern": r"^(latest|\d+\.\d+)$"}
        parameters: dict[str, Any] = {
            "LegacyVersion": {
                "name": LEGACY_HEADER, "in": "header", "required": False,
                "description": "The microversion (MAJOR.MINOR or 'latest'); without any version header "
                               "the minimum is served.",
                "schema": {**version_header, "enum": [served]},
            },
            "StandardVersion": {
                "name": STANDARD_HEADER, "in": "header", "required": False,
                "description": "'baremetal MAJOR.MINOR' (wins over the legacy header).",
                "schema": {"type": "string", "enum": [f"baremetal {served}"]},
            },
            "ClientToken": {
                "name": "X-Client-Token", "in": "header", "required": False,
                "description": "Idempotency token: a retry with the same token and request replays the "
                               "first answer (Idempotent-Replayed: true); the same token with another "
                               "request, or while the first is in flight, is a 409.",
                "schema": {"type": "string", "minLength": 1, "maxLength": 255,
                           "pattern": "^[A-Za-z0-9._~:-]+$"},
            },
        }  # fmt: skip
        if self.etags:
            parameters["IfMatch"] = {
                "name": "If-Match", "in": "header", "required": False,
                "description": "Entity tags (or *): the write happens only if one matches the current "
                               "etag, checked atomically with the write; otherwise 412.",
                "schema": {"type": "string"}, "x-introduced-in": _v(versions.ETAG_VERSION),
            }  # fmt: skip
        headers: dict[str, Any] = {
            "MinimumVersion": {"required": True,
                               "schema": {"type": "string", "const": _v(versions.MIN_VERSION)}},
            "MaximumVersion": {"required": True,
                               "schema": {"type": "string", "const": _v(versions.MAX_VERSION)}},
            "ServedVersion": {"description": "The version that served the request (absent when the "
                                             "requested version was refused).",
                              "schema": {"type": "string", "const": served}},
            "ServedStandardVersion": {"schema": {"type": "string", "const": f"baremetal {served}"}},
            "Location": {"required": True, "schema": {"type": "string"}},
            "IdempotentReplayed": {"description": "Present (true) when this is a replayed answer.",
                                   "schema": {"type": "string", "enum": ["true"]}},
        }  # fmt: skip
        if self.etags:
            headers["ETag"] = {
                "required": True,
                "description": "The resource's entity tag (weak), also its `etag` field.",
                "schema": {"type": "string", "pattern": '^(W/)?"[^"]*"$'},
                "x-introduced-in": _v(versions.ETAG_VERSION),
            }
        responses: dict[str, Any] = {}
        for status in ERROR_STATUSES:
            if status == 412 and not self.etags:
                continue
            err = self.response(status, _ERROR_TITLES[status], {"$ref": "#/components/schemas/Error"})
            err["headers"][LEGACY_HEADER] = {"$ref": "#/components/headers/ServedVersion"}
            responses[f"Error{status}"] = err
        self.schemas["Link"] = _LINK
        self.schemas["Error"] = _ERROR
        return {
            "schemas": dict(sorted(self.schemas.items())),
            "parameters": parameters,
            "headers": headers,
            "responses": responses,
        }

    def build(self) -> dict[str, Any]:
        self.discovery_paths()
        for decl in self.decls.values():
            self.resource_paths(decl)
        for decl in self.decls.values():
            if decl.since <= self.version:
                self.sub_collections(decl)
        self.node_paths()
        components = self.components()
        return {
            "openapi": OPENAPI_VERSION,
            "info": {
                "title": "Bare-metal API (Ironic v1 wire-compatible)",
                "version": _v(self.version),
                "description": f"The API as served at microversion {self.version} (send "
                f"`{LEGACY_HEADER}: {self.version}`). Fields, parameters and operations carry "
                "`x-introduced-in`, the version they appeared in.",
                "x-minimum-version": _v(versions.MIN_VERSION),
                "x-maximum-version": _v(versions.MAX_VERSION),
            },
            "jsonSchemaDialect": "https://spec.openapis.org/oas/3.1/dialect/base",
            "paths": dict(sorted(self.paths.items())),
            "components": components,
        }


_ERROR_TITLES: Final = {
    400: "Bad request (schema, malformed JSON, bad parameter)",
    403: "Forbidden by policy",
    404: "Not found (or not served at this version)",
    406: "Not acceptable (a field, parameter or verb newer than the served version, or the version "
    "itself)",
    409: "Conflict (duplicate, state, X-Client-Token reused or in flight)",
    412: "Precondition failed (If-Match does not match the current etag)",
    413: "Request body too large",
    415: "The body's Content-Type is not JSON (a body without one is read as JSON)",
}

_ERROR: Final[dict[str, Any]] = {
    "type": "object",
    "description": "Ironic's error body: error_message is a JSON document serialized as a string.",
    "properties": {
        "error_message": {
            "type": "string",
            "contentMediaType": "application/json",
            "contentSchema": {
                "type": "object",
                "properties": {
                    "faultcode": {"type": "string", "enum": ["Client", "Server"]},
                    "faultstring": {"type": "string"},
                    "description": {"type": "string"},
                    "debuginfo": {"type": ["string", "null"]},
                },
                "required": ["faultcode", "faultstring"],
            },
        },
        "errors": {
            "type": "array",
            "description": "apimw's stable error codes (the same error, machine-readable).",
            "items": {
                "type": "object",
                "properties": {
                    "status": {"type": "integer"},
                    "code": {"type": "string"},
                    "title": {"type": "string"},
                    "detail": {"type": "string"},
                    "request_id": {"type": ["string", "null"]},
                },
                "required": ["status", "code", "title", "detail"],
            },
        },
    },
    "required": ["error_message"],
}
