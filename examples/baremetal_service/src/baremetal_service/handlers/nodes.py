"""``/v1/nodes``: CRUD, lists with filters and paging, JSON Patch, states, validate, maintenance."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import jsonpatch
from flask import Blueprint, Response, request

from baremetal_service import schemas, versions
from baremetal_service.exceptions import PolicyForbidden
from baremetal_service.handlers import common, masking, serialize
from baremetal_service.handlers.context import if_match, project_id, service, token
from baremetal_service.objects.nodes import (
    FILTERS,
    FLAGS,
    NODE_FIELDS,
    NODE_LIST_FIELDS,
    PATCHABLE,
    SORT_KEYS,
)
from baremetal_service.values import json_copy

bp = Blueprint("nodes", __name__)

_PATCHABLE_SET = frozenset(PATCHABLE)

#: Every query parameter Ironic's node lists take (node.py ``get_all`` / ``detail``); any
#: other is 400 "Unexpected arguments" (ironic/common/args.py).
_LIST_ARGS: frozenset[str] = frozenset(
    {name for name, _ in FILTERS}
    | {name for name, _ in FLAGS}
    | {"chassis_uuid", "instance_uuid", "marker", "limit", "sort_key", "sort_dir", "fields", "detail"}
)
#: Ironic's provision states (its state machine's) and node faults (ironic/common/faults.py).
PROVISION_STATES: frozenset[str] = frozenset({
    "active", "adopt failed", "adopting", "available", "clean failed", "clean hold", "clean wait",
    "cleaning", "deleting", "deploy failed", "deploy hold", "deploying", "enroll", "error",
    "inspect failed", "inspect wait", "inspecting", "manageable", "rescue", "rescue failed",
    "rescue wait", "rescuing", "service failed", "service hold", "service wait", "servicing",
    "unrescue failed", "unrescuing", "verifying", "wait call-back",
})  # fmt: skip
FAULTS: tuple[str, ...] = ("power failure", "clean failure", "rescue abort failure", "service failure")


def _check_filter_value(name: str, value: str) -> None:
    if name == "provision_state" and value not in PROVISION_STATES:
        raise common.bad_request(f'Provision state "{value}" is not valid', "request.invalid-parameter")
    if name == "fault" and value not in FAULTS:
        raise common.bad_request(
            f'Unrecognized fault "{value}" is specified, allowed faults are {FAULTS}',
            "request.invalid-parameter",
        )


def _secrets(node: Any) -> frozenset[str]:
    driver = serialize.get(node, "driver")
    return service().secret_fields(driver) if isinstance(driver, str) else frozenset()


def _doc(node: Any, fields: list[str] | None = None) -> dict[str, Any]:
    return serialize.node_doc(node, common.api_version(), common.base_url(), fields, _secrets(node))


def _etag_headers(node: Any) -> list[tuple[str, str]]:
    etag = serialize.get(node, "etag")
    if etag and common.api_version() >= versions.ETAG_VERSION:
        return [("ETag", etag)]
    return []


# -- collection ---------------------------------------------------------------------------------


def _list(detail: bool, path: str, scope: dict[str, Any] | None = None) -> Response:
    served = common.api_version()
    common.check_args(_LIST_ARGS)
    fields = common.parse_fields(NODE_FIELDS, "node")
    detail_arg = common.parse_bool("detail", request.args["detail"]) if "detail" in request.args else None
    if detail_arg is not None:
        if detail:
            raise common.bad_request("Can not specify ?detail=True parameter to this endpoint.")
        if served < versions.DETAIL_QUERY:  # Ironic: 400, not 406
            raise common.bad_request(f"Invalid query parameter ?detail={detail_arg} received.")
        if detail_arg and fields is not None:
            raise common.bad_request("Can not specify ?detail=True and fields in the same request.")
        detail = detail_arg
    if detail and fields is not None:
        raise common.bad_request("Can not specify fields on the /detail endpoint.")
    paging = common.parse_paging(SORT_KEYS)
    if paging["sort_key"] != "id":
        common.check_fields_allowed([paging["sort_key"]], NODE_FIELDS, "node")
    filters: dict[str, Any] = {}
    args = request.args  # (a missing key's .get() costs werkzeug an exception: ask `in` first)
    for name, since in FILTERS:
        if name in args:
            value = args[name]
            common.require(f"Filtering nodes by {name}", since)
            _check_filter_value(name, value)
            filters[name] = value.split(",") if name == "shard" else value
    for name, since in FLAGS:
        flag = common.parse_bool(name, args[name]) if name in args else None
        if flag is not None:
            common.require(f"Filtering nodes by {name}", since)
            filters[name] = flag
    chassis = common.query_uuid("chassis_uuid")
    if chassis is not None:
        filters["chassis_uuid"] = chassis
    instance = common.query_uuid("instance_uuid")
    if instance is not None:
        filters["instance_uuid"] = instance
    extra = {k: _query_value(v) for k, v in filters.items()}
    if detail_arg:  # the next page is a detail page too
        extra["detail"] = "true"
    filters.update(scope or {})
    if not filters.get("include_children") and "parent_node" not in filters:
        filters["children"] = False  # Ironic lists child nodes only when asked to
    filters.pop("include_children", None)
    if detail:
        shown: list[str] | None = None
    else:
        shown = fields if fields is not None else list(NODE_LIST_FIELDS)
        if fields is None:
            shown = list(NODE_FIELDS.visible(shown, served))
    # Fetch only what is shown (a list of six fields does not decode sixty); masking
    # driver_info needs the driver, and the next link the sort key.
    wanted: set[str] | None = None
    if shown is not None:
        wanted = {*shown, paging["sort_key"]} - {"id"}
        if "driver_info" in wanted:
            wanted.add("driver")
    svc = service()
    query: dict[str, Any] = {
        "project_id": project_id(), "filters": filters, "sort_key": paging["sort_key"],
        "sort_dir": paging["sort_dir"], "fields": wanted,
    }  # fmt: skip
    render = serialize.node_renderer(served, common.base_url(), shown, iso_strings=True)  # data API documents

    def fetch(count: int, marker: str | None) -> tuple[Sequence[Any], Sequence[str]]:
        nodes = svc.list_nodes(**query, limit=count, marker=marker)
        if shown is not None and "driver_info" not in shown:
            return [render(n) for n in nodes], [n["uuid"] for n in nodes]
        secrets: dict[str, frozenset[str]] = {}
        docs = []
        for n in nodes:
            driver = n.get("driver") or ""
            if driver not in secrets:
                secrets[driver] = svc.secret_fields(driver)
            docs.append(render(n, secrets[driver]))
        return docs, [n["uuid"] for n in nodes]

    large = shown is None or not _SMALL_FIELDS.issuperset(shown)
    page = common.collect_page(fetch, paging["limit"], paging["marker"], large=large)
    next_link = common.next_link(page.next_marker, "nodes", paging, shown or [], extra, path=path)
    return common.list_response("nodes", page, next_link)


#: Node fields of a bounded size (no free-form JSON, no long text): a list of these only is
#: read in one go (:func:`.common.collect_page`).
_SMALL_FIELDS = frozenset(NODE_LIST_FIELDS) | {
    "driver", "resource_class", "owner", "lessee", "conductor_group", "power_state", "created_at",
    "updated_at", "provision_updated_at", "chassis_uuid", "conductor", "shard", "parent_node", "links",
}  # fmt: skip


def _query_value(value: Any) -> str:
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, list):
        return ",".join(value)
    return str(value)


@bp.route("/v1/nodes", methods=["GET"])
@bp.route("/v1/nodes/", methods=["GET"])
def list_nodes() -> Response:
    return _list(False, "nodes")


@bp.route("/v1/nodes", methods=["DELETE", "PATCH"])
@bp.route("/v1/nodes/", methods=["DELETE", "PATCH"])
def node_collection_without_ident() -> Response:
    # Ironic (pecan's RestController) asks for the missing id instead of answering 405.
    raise common.bad_request("Missing mandatory parameter: node_ident", "request.missing-parameter")


@bp.route("/v1/chassis/<chassis_ident>/nodes", methods=["GET"])
def list_chassis_nodes(chassis_ident: str) -> Response:
    chassis = service().crud["chassis"].get(chassis_ident)
    return _list(False, f"chassis/{chassis_ident}/nodes", {"chassis_uuid": serialize.get(chassis, "uuid")})


@bp.route("/v1/nodes/detail", methods=["GET"])
def list_nodes_detail() -> Response:
    return _list(True, "nodes/detail")


@bp.route("/v1/nodes", methods=["POST"])
@bp.route("/v1/nodes/", methods=["POST"])
def create_node() -> Response:
    body = common.json_body()
    common.validate(body, schemas.NODE_CREATE, "node")
    common.check_fields_allowed(body, NODE_FIELDS, "node")
    values = dict(body)
    if common.api_version() < versions.ENROLL_STATE:
        values.setdefault("_initial_state", "available")
    node = service().create_node(values, project_id=project_id(), token=token())
    doc = _doc(node)
    return common.json_response(doc, 201, [common.location("nodes", doc["uuid"]), *_etag_headers(node)])


# -- one node -----------------------------------------------------------------------------------


@bp.route("/v1/nodes/<ident>", methods=["GET"])
def get_node(ident: str) -> Response:
    common.check_args(_GET_ARGS)
    fields = common.parse_fields(NODE_FIELDS, "node")
    node = service().get_node(ident, project_id=project_id())
    return common.json_response(_doc(node, fields), headers=_etag_headers(node))


_GET_ARGS: frozenset[str] = frozenset({"fields"})


def _patch_path_field(path: str) -> str:
    first = path.split("/")[1]
    return first.replace("~1", "/").replace("~0", "~")


@bp.route("/v1/nodes/<ident>", methods=["PATCH"])
def patch_node(ident: str) -> Response:
    patch = common.json_body()
    common.validate(patch, schemas.PATCH, "patch")
    touched: set[str] = set()
    for op in patch:
        field = _patch_path_field(op["path"])
        if field not in _PATCHABLE_SET:
            raise common.bad_request(
                f"Cannot patch {op['path']}. Only the following can be updated: {', '.join(PATCHABLE)}",
                "request.read-only-field",
            )
        if op["op"] in ("add", "replace") and "value" not in op:
            raise common.bad_request(f"'add' and 'replace' operations need a value (path {op['path']}).")
        touched.add(field)
    common.check_fields_allowed(touched, NODE_FIELDS, "node")
    caller = project_id()
    tenancy = touched & _TENANCY_FIELDS

    def changes(node: dict[str, Any]) -> dict[str, Any]:
        # Runs inside the service's compare-and-swap loop on the current, unmasked node,
        # so concurrent PATCHes never lose each other's changes.
        if tenancy:
            _check_tenancy_paths(node, tenancy, caller)
        return _patched_changes(node, patch, touched)

    node = service().update_node(ident, changes, project_id=project_id(), if_match=if_match())
    return common.json_response(_doc(node), headers=_etag_headers(node))


_TENANCY_FIELDS = frozenset({"owner", "lessee"})


def _check_tenancy_paths(node: dict[str, Any], fields: set[str], caller: str | None) -> None:
    """Ironic authorizes a PATCH by the paths it names, whatever the values: for a
    project-scoped caller ``/owner`` is denied (``baremetal:node:update:owner`` is
    system-only) and ``/lessee`` is the owner's alone (``baremetal:node:update:lessee``).
    The service checks the resulting values again."""
    if caller is None:
        return
    if "owner" in fields:
        raise PolicyForbidden("baremetal:node:update:owner")
    if "lessee" in fields and node.get("owner") != caller:
        raise PolicyForbidden("baremetal:node:update:lessee")


def _patched_changes(
    node: Mapping[str, Any], patch: list[dict[str, Any]], touched: set[str] | None = None
) -> dict[str, Any]:
    """The changes *patch* makes to *node*'s patchable fields (400 when it cannot apply or the
    result breaks the node schema).  *node* is left as it is.

    *touched*: the top-level fields the patch's paths name.  Only their values are copied
    before the patch applies (its operations cannot reach any other: no ``from`` paths, no
    root path); without it every field is.
    """
    current = {f: serialize.get(node, f) for f in PATCHABLE}
    patched = dict(current)
    for field in PATCHABLE if touched is None else touched & _PATCHABLE_SET:
        patched[field] = json_copy(current[field])
    try:
        patched = jsonpatch.apply_patch(patched, patch, in_place=True)
    except (jsonpatch.JsonPatchException, jsonpatch.JsonPointerException) as exc:
        raise common.invalid_patch(exc) from None
    for field in _PATCHABLE_SET - set(patched):
        patched[field] = None  # "remove" of a top-level field resets it
    for field, value in list(patched.items()):
        if value is None and serialize.default_for(field) is not None:
            patched[field] = serialize.default_for(field)
    if patched.get("driver") in (None, ""):
        raise common.bad_request("Cannot remove the driver of a node.", "request.invalid-patch")
    for name in _MASKED_PATCHABLE if touched is None else _MASKED_PATCHABLE & touched:
        # A client that sends back a masked value as it read it ("******", a URL with
        # "user:******@") keeps the stored one, at any depth.
        stored = current[name]
        shown = serialize.mask_field(name, stored, _secrets(node) if name == "driver_info" else frozenset())
        patched[name] = masking.restore_masked(patched[name], stored, shown)
    common.validate(
        {k: v for k, v in patched.items() if v is not None or k in _NULLABLE}, schemas.NODE_PATCHED, "node"
    )
    return {f: patched[f] for f in PATCHABLE if patched[f] != current[f]}


#: Patchable fields shown masked.
_MASKED_PATCHABLE = frozenset(serialize.MASKED_FIELDS) & _PATCHABLE_SET

_NULLABLE = frozenset(
    name
    for name, schema in schemas.NODE_PROPERTIES.items()
    if isinstance(schema.get("type"), list) and "null" in schema["type"]
)


@bp.route("/v1/nodes/<ident>", methods=["DELETE"])
def delete_node(ident: str) -> Response:
    service().delete_node(ident, project_id=project_id(), if_match=if_match())
    return common.empty_response(204)


# -- states -------------------------------------------------------------------------------------


@bp.route("/v1/nodes/<ident>/states", methods=["GET"])
def get_states(ident: str) -> Response:
    node = service().get_node(ident, project_id=project_id())
    served = common.api_version()
    doc = {
        name: serialize.get(node, name) for name in NODE_FIELDS.visible(serialize.NODE_STATE_FIELDS, served)
    }
    doc["provision_state"] = serialize.shown_provision_state(
        doc["provision_state"], before_available=served < versions.AVAILABLE_STATE
    )
    return common.json_response(doc)


def _states_location(node_uuid: str) -> list[tuple[str, str]]:
    return [common.location("nodes", node_uuid, "states")]


#: Ironic's API verbs -> the target the state machine knows.
_VERB_ALIASES = {"deploy": "active", "undeploy": "deleted"}


@bp.route("/v1/nodes/<ident>/states/provision", methods=["PUT"])
def set_provision_state(ident: str) -> Response:
    body = common.json_body()
    common.validate(body, schemas.PROVISION, "provision state")
    target = body["target"]
    needed = versions.VERB_VERSIONS.get(target)
    if needed is not None:
        common.require(f"The provision verb {target!r}", needed)
    clean_steps = body.get("clean_steps")
    if target == "clean" and not clean_steps:
        raise common.bad_request('"clean_steps" is required when setting target provision state to clean')
    if clean_steps and target != "clean":
        raise common.bad_request('"clean_steps" is only valid when setting target provision state to clean')
    node = service().set_provision_state(
        ident,
        _VERB_ALIASES.get(target, target),
        project_id=project_id(),
        clean_steps=clean_steps,
        if_match=if_match(),
    )
    return common.empty_response(202, _states_location(str(serialize.get(node, "uuid"))))


_POWER_TARGETS = ("power on", "power off", "rebooting", "soft power off", "soft rebooting")


@bp.route("/v1/nodes/<ident>/states/power", methods=["PUT"])
def set_power_state(ident: str) -> Response:
    body = common.json_body()
    common.validate(body, schemas.POWER, "power state")
    target = body["target"]
    if target not in _POWER_TARGETS:
        raise common.bad_request(
            f"Invalid power state target {target!r}; valid targets are: {', '.join(_POWER_TARGETS)}",
            "request.invalid-power-target",
        )
    if target.startswith("soft ") or body.get("timeout") is not None:
        common.require("Soft power off, soft reboot and power timeouts", versions.SOFT_POWER_OFF)
    node = service().set_power_state(
        ident, target, project_id=project_id(), timeout=body.get("timeout"), if_match=if_match()
    )
    return common.empty_response(202, _states_location(str(serialize.get(node, "uuid"))))


# -- validate and maintenance -------------------------------------------------------------------


@bp.route("/v1/nodes/<ident>/validate", methods=["GET"])
def validate_node(ident: str) -> Response:
    result = service().validate_node(ident, project_id=project_id())
    return common.json_response(result)


@bp.route("/v1/nodes/<ident>/maintenance", methods=["PUT"])
def set_maintenance(ident: str) -> Response:
    body = common.json_body(allow_empty=True)
    common.validate(body, schemas.MAINTENANCE, "maintenance")
    reason = (body or {}).get("reason")
    service().set_maintenance(ident, True, reason, project_id=project_id(), if_match=if_match())
    return common.empty_response(202)


@bp.route("/v1/nodes/<ident>/maintenance", methods=["DELETE"])
def unset_maintenance(ident: str) -> Response:
    service().set_maintenance(ident, False, None, project_id=project_id(), if_match=if_match())
    return common.empty_response(202)
