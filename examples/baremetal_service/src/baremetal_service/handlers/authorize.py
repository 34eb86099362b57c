"""Who may do what: Ironic's access rules (:mod:`baremetal_service.policy`) applied per route.

:data:`ROUTES` names, for every endpoint of the API and method, the rule Ironic checks
and the object it checks it against; :class:`Authorizer` runs before each request's
handler (``create_flask_app(..., authorizer=...)``) when the deployment authenticates with
Keystone, as Ironic enforces its policy only then.

What a caller gets, as on Ironic:

* a node (or a port, port group, volume connector or target of a node) is checked against
  its node's ``owner`` and ``lessee``: first ``baremetal:node:get`` -- a caller who may not
  read it gets **404**, as if it did not exist -- then the operation's rule: **403**
  ``Access was denied to the following resource: <rule>``;
* lists: ``<kind>:list_all`` lets the caller see everything; otherwise ``<kind>:list``
  with a project-scoped token, and the list shows only what that project owns or leases
  (the data layer's project scope, :mod:`baremetal_service.handlers.noauth`);
* a node PATCH is checked by the paths it names (``/owner``: ``baremetal:node:update:owner``,
  ``/instance_info``: ``baremetal:node:update_instance_info``, ... anything else:
  ``baremetal:node:update``); creating a node is ``baremetal:node:create``, or
  ``...:create:self_owned_node`` for a project (which then owns it); deleting one is
  ``baremetal:node:delete``, or ``...:delete:self_owned_node`` for its owner's admin.

An endpoint missing from :data:`ROUTES` is refused (403): a route added without its rule
is closed, never open (a test lists every endpoint the app registers).

Without ``auth_strategy = keystone`` the rules still apply to every request keystonemiddleware's
``auth_token`` validated (a paste pipeline that puts it in front of ``noauth``): a token's
roles and scope are never ignored.  Requests no token vouches for are the operator's, as
with ``noauth`` alone.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from flask import request
from oslo_policy import policy as oslo_policy

from baremetal_service import exceptions as exc
from baremetal_service import policy
from baremetal_service.handlers import common
from baremetal_service.handlers.context import service

LOG = logging.getLogger(__name__)

__all__ = ["ROUTES", "Authorizer", "Route"]


@dataclass(frozen=True)
class Route:
    """One endpoint's check.

    *rule*: the rule name (``None``: open to every authenticated caller).  *kind*: the object
    the rule is checked against, found by the view argument *arg*: ``node``, ``port``,
    ``portgroup``, ``volume`` (a connector or target, by the ``what`` argument),
    ``allocation``, ``runbook``; ``list:<prefix>`` for a collection (``list_all`` /
    ``list``), ``create`` for a POST whose body names the node, ``None`` for a check on
    the caller alone.  *parent*: a list under a node (``node_ident``) or port group
    (``ident``) checks ``baremetal:node:get`` on it first.
    """

    rule: str | None = None
    kind: str | None = None
    arg: str = "ident"
    parent: str | None = None
    extra: tuple[str, ...] = field(default=())


def _node(rule: str, arg: str = "ident") -> Route:
    return Route(rule, "node", arg)


def _list(prefix: str, parent: str | None = None) -> Route:
    return Route(prefix, "list", parent=parent)


def _on(blueprint: str, kind: str, prefix: str) -> dict[str, dict[str, Route]]:
    """A declared resource's get/patch/delete of one *kind* by ``ident``: ``<prefix>:get|update|delete``."""
    return {
        f"{blueprint}.get": {"GET": Route(f"{prefix}:get", kind)},
        f"{blueprint}.patch": {"PATCH": Route(f"{prefix}:update", kind)},
        f"{blueprint}.delete": {"DELETE": Route(f"{prefix}:delete", kind)},
    }


def _plain(prefix: str, read: str = "get") -> dict[str, dict[str, Route]]:
    """A resource checked on the caller alone (chassis, deploy templates, inspection rules)."""
    return {
        "list": {"GET": Route(f"{prefix}:{read}")},
        "list_detail": {"GET": Route(f"{prefix}:{read}")},
        "get": {"GET": Route(f"{prefix}:{read}")},
        "create": {"POST": Route(f"{prefix}:create")},
        "patch": {"PATCH": Route(f"{prefix}:update")},
        "delete": {"DELETE": Route(f"{prefix}:delete")},
    }


OPEN: Final = Route()
#: node PATCH (its rules come from the patch's paths) and the two node rules with a fallback
NODE_PATCH: Final = Route("baremetal:node:update", "node_patch")
NODE_CREATE: Final = Route("baremetal:node:create", "node_create")
NODE_DELETE: Final = Route("baremetal:node:delete", "node_delete")

#: endpoint -> method -> its check.  The one table of the API's access rules.
ROUTES: Final[dict[str, dict[str, Route]]] = {
    "root.root": {"GET": OPEN},
    "root.v1": {"GET": OPEN},
    "openapi.document": {"GET": OPEN},
    "static": {"GET": OPEN},
    # nodes
    "nodes.list_nodes": {"GET": _list("baremetal:node")},
    "nodes.list_nodes_detail": {"GET": _list("baremetal:node")},
    "nodes.list_chassis_nodes": {"GET": Route("baremetal:chassis:get")},
    "nodes.create_node": {"POST": NODE_CREATE},
    "nodes.node_collection_without_ident": {"DELETE": OPEN, "PATCH": OPEN},
    "nodes.get_node": {"GET": _node("baremetal:node:get")},
    "nodes.patch_node": {"PATCH": NODE_PATCH},
    "nodes.delete_node": {"DELETE": NODE_DELETE},
    "nodes.get_states": {"GET": _node("baremetal:node:get_states")},
    "nodes.set_power_state": {"PUT": _node("baremetal:node:set_power_state")},
    "nodes.set_provision_state": {"PUT": _node("baremetal:node:set_provision_state")},
    "nodes.validate_node": {"GET": _node("baremetal:node:validate")},
    "nodes.set_maintenance": {"PUT": _node("baremetal:node:set_maintenance")},
    "nodes.unset_maintenance": {"DELETE": _node("baremetal:node:clear_maintenance")},
    "node_features.list_traits": {"GET": _node("baremetal:node:traits:list")},
    "node_features.set_traits": {"PUT": _node("baremetal:node:traits:set")},
    "node_features.add_trait": {"PUT": _node("baremetal:node:traits:set")},
    "node_features.remove_traits": {"DELETE": _node("baremetal:node:traits:delete")},
    "node_features.remove_trait": {"DELETE": _node("baremetal:node:traits:delete")},
    "node_features.list_vifs": {"GET": _node("baremetal:node:vif:list")},
    "node_features.attach_vif": {"POST": _node("baremetal:node:vif:attach")},
    "node_features.detach_vif": {"DELETE": _node("baremetal:node:vif:detach")},
    "node_features.attach_vmedia": {"POST": _node("baremetal:node:vmedia:attach")},
    "node_features.detach_vmedia": {"DELETE": _node("baremetal:node:vmedia:detach")},
    # the methods the route does not take: its 404 or 405, whoever asks
    "node_features.other_vmedia": dict.fromkeys(("GET", "PUT", "PATCH"), OPEN),
    "node_features.list_firmware": {"GET": _node("baremetal:node:firmware:get")},
    "node_history.list_history": {"GET": _node("baremetal:node:history:get")},
    "node_history.get_history_entry": {"GET": _node("baremetal:node:history:get")},
    "node_management.get_boot_device": {"GET": _node("baremetal:node:get_boot_device")},
    "node_management.get_supported_boot_devices": {"GET": _node("baremetal:node:get_boot_device")},
    "node_management.set_boot_device": {"PUT": _node("baremetal:node:set_boot_device")},
    "node_management.get_console": {"GET": _node("baremetal:node:get_console")},
    "node_management.set_console": {"PUT": _node("baremetal:node:set_console_state")},
    "node_management.list_indicators": {"GET": _node("baremetal:node:get_indicator_state")},
    "node_management.get_indicator": {"GET": _node("baremetal:node:get_indicator_state")},
    "node_management.set_indicator": {"PUT": _node("baremetal:node:set_indicator_state")},
    "node_management.set_raid": {"PUT": _node("baremetal:node:set_raid_state")},
    "node_management.set_boot_mode": {"PUT": _node("baremetal:node:set_boot_mode")},
    "node_management.set_secure_boot": {"PUT": _node("baremetal:node:set_secure_boot")},
    "node_management.put_other_state": {"PUT": OPEN},  # its 405, whoever asks
    "node_management.list_bios": {"GET": _node("baremetal:node:bios:get")},
    "node_management.list_children": {"GET": _node("baremetal:node:get")},
    "node_management.vendor_methods": {"GET": _node("baremetal:node:vendor_passthru")},
    "node_management.vendor_passthru": {
        method: _node("baremetal:node:vendor_passthru")
        for method in ("GET", "PUT", "POST", "PATCH", "DELETE")
    },
    "node_management.list_shards": {"GET": Route("baremetal:shards:get")},
    "node_management.post_events": {"POST": Route("baremetal:events:post")},
    # the ramdisk's heartbeat (no agent token is ever right here: the handler refuses it)
    "heartbeat.heartbeat_node": {"POST": Route("baremetal:node:ipa_heartbeat")},
    "heartbeat.heartbeat": {"POST": Route("baremetal:node:ipa_heartbeat")},
    # ports, port groups
    "declared_port.list": {"GET": _list("baremetal:port")},
    "declared_port.list_detail": {"GET": _list("baremetal:port")},
    "declared_port.create": {"POST": Route("baremetal:port:create", "create")},
    **_on("declared_port", "port", "baremetal:port"),
    "ports.list_node_ports": {"GET": _list("baremetal:port", parent="node_ident")},
    "ports.list_node_ports_detail": {"GET": _list("baremetal:port", parent="node_ident")},
    "declared_portgroup.list": {"GET": _list("baremetal:portgroup")},
    "declared_portgroup.list_detail": {"GET": _list("baremetal:portgroup")},
    "declared_portgroup.create": {"POST": Route("baremetal:portgroup:create", "create")},
    **_on("declared_portgroup", "portgroup", "baremetal:portgroup"),
    "portgroups.list_node_portgroups": {"GET": _list("baremetal:portgroup", parent="node_ident")},
    "portgroups.list_node_portgroups_detail": {"GET": _list("baremetal:portgroup", parent="node_ident")},
    "portgroups.list_portgroup_ports": {"GET": _list("baremetal:port", parent="portgroup")},
    "portgroups.list_portgroup_ports_detail": {"GET": _list("baremetal:port", parent="portgroup")},
    # volume connectors and targets
    "volume.volume_index": {"GET": Route("baremetal:volume:get")},
    "volume.node_volume_index": {"GET": Route("baremetal:volume:get", "node", "node_ident")},
    "volume.list_volume": {"GET": _list("baremetal:volume")},
    "volume.list_node_volume": {"GET": _list("baremetal:volume", parent="node_ident")},
    "volume.create_volume": {"POST": Route("baremetal:volume:create", "create")},
    "volume.get_volume": {"GET": Route("baremetal:volume:get", "volume")},
    "volume.patch_volume": {"PATCH": Route("baremetal:volume:update", "volume")},
    "volume.delete_volume": {"DELETE": Route("baremetal:volume:delete", "volume")},
    "volume.node_volume_item": {
        "POST": Route("baremetal:volume:create", "node", "node_ident"),
        "GET": Route("baremetal:volume:get", "node", "node_ident"),
        "PATCH": Route("baremetal:volume:update", "node", "node_ident"),
        "DELETE": Route("baremetal:volume:delete", "node", "node_ident"),
    },
    # chassis, drivers, conductors, deploy templates, inspection rules, resource classes
    **{f"declared_chassis.{op}": routes for op, routes in _plain("baremetal:chassis").items()},
    **{f"declared_deploy_template.{op}": r for op, r in _plain("baremetal:deploy_template").items()},
    "drivers.list_drivers": {"GET": Route("baremetal:driver:get")},
    "drivers.get_driver": {"GET": Route("baremetal:driver:get")},
    "drivers.get_driver_properties": {"GET": Route("baremetal:driver:get_properties")},
    "drivers.get_raid_logical_disk_properties": {
        "GET": Route("baremetal:driver:get_raid_logical_disk_properties")
    },
    "conductors.list_conductors": {"GET": Route("baremetal:conductor:get")},
    "conductors.get_conductor": {"GET": Route("baremetal:conductor:get")},
    "inspection_rules.list_rules": {"GET": Route("baremetal:inspection_rule:get")},
    "inspection_rules.get_rule": {"GET": Route("baremetal:inspection_rule:get")},
    "inspection_rules.create_rule": {"POST": Route("baremetal:inspection_rule:create")},
    "inspection_rules.patch_rule": {"PATCH": Route("baremetal:inspection_rule:update")},
    "inspection_rules.delete_rule": {"DELETE": Route("baremetal:inspection_rule:delete")},
    "resource_classes.list_resource_classes": {"GET": Route("baremetal:resource_class:get")},
    "resource_classes.get_resource_class": {"GET": Route("baremetal:resource_class:get")},
    "resource_classes.create_resource_class": {"POST": Route("baremetal:resource_class:create")},
    "resource_classes.put_resource_class": {"PUT": Route("baremetal:resource_class:update")},
    "resource_classes.delete_resource_class": {"DELETE": Route("baremetal:resource_class:delete")},
    # allocations
    "allocations.list_allocations": {"GET": _list("baremetal:allocation")},
    "allocations.create_allocation": {"POST": Route("baremetal:allocation:create")},
    "allocations.get": {"GET": Route("baremetal:allocation:get", "allocation")},
    "allocations.patch": {"PATCH": Route("baremetal:allocation:update", "allocation")},
    "allocations.delete": {"DELETE": Route("baremetal:allocation:delete", "allocation")},
    "allocations.get_node_allocation": {"GET": _node("baremetal:node:get", "node_ident")},
    "allocations.delete_node_allocation": {
        "DELETE": Route("baremetal:allocation:delete", "node_allocation", "node_ident")
    },
    # runbooks
    "runbooks.list_runbooks": {"GET": _list("baremetal:runbook")},
    "runbooks.list_runbooks_detail": {"GET": _list("baremetal:runbook")},
    "runbooks.create_runbook": {"POST": Route("baremetal:runbook:create")},
    "runbooks.get": {"GET": Route("baremetal:runbook:get", "runbook")},
    "runbooks.patch": {"PATCH": Route("baremetal:runbook:update", "runbook_patch")},
    "runbooks.delete": {"DELETE": Route("baremetal:runbook:delete", "runbook")},
    "runbooks.get_runbook_traits": {"GET": Route("baremetal:runbook:get", "runbook")},
    "runbooks.set_runbook_traits": {"PUT": Route("baremetal:runbook:update", "runbook")},
    "runbooks.add_runbook_trait": {"PUT": Route("baremetal:runbook:update", "runbook")},
    "runbooks.remove_runbook_traits": {"DELETE": Route("baremetal:runbook:update", "runbook")},
    "runbooks.remove_runbook_trait": {"DELETE": Route("baremetal:runbook:update", "runbook")},
}  # fmt: skip

#: A node PATCH path's rule (the first whose prefix matches; any other path: ``baremetal:node:update``).
PATCH_PATH_RULES: Final = (
    ("/instance_info", "baremetal:node:update_instance_info"),
    ("/extra", "baremetal:node:update_extra"),
    ("/driver_info", "baremetal:node:update:driver_info"),
    ("/properties", "baremetal:node:update:properties"),
    ("/chassis_uuid", "baremetal:node:update:chassis_uuid"),
    ("/instance_uuid", "baremetal:node:update:instance_uuid"),
    ("/instance_name", "baremetal:node:update_instance_info"),
    ("/lessee", "baremetal:node:update:lessee"),
    ("/owner", "baremetal:node:update:owner"),
    ("/driver", "baremetal:node:update:driver_interfaces"),
    ("/network_data", "baremetal:node:update:network_data"),
    ("/conductor_group", "baremetal:node:update:conductor_group"),
    ("/name", "baremetal:node:update:name"),
    ("/retired", "baremetal:node:update:retired"),
    ("/shard", "baremetal:node:update:shard"),
    ("/parent_node", "baremetal:node:update:parent_node"),
    ("/disable_power_off", "baremetal:node:update:disable_power_off"),
)

_FALSE: Final = frozenset({"false", "0", "no", "off", "f", "n"})


def patch_rules(patch: Any) -> list[str]:
    """The rules a node JSON Patch needs, by its paths (Ironic's order and fallbacks)."""
    rules: list[str] = []
    generic = False
    for op in patch if isinstance(patch, list) else []:
        path = str(op.get("path", "")) if isinstance(op, dict) else ""
        rule = next((name for prefix, name in PATCH_PATH_RULES if path.startswith(prefix)), None)
        if rule is None and path.endswith("_interface"):
            rule = "baremetal:node:update:driver_interfaces"
        if rule is None and path.startswith("/automated_clean") and str(op.get("value")).lower() in _FALSE:
            rule = "baremetal:node:disable_cleaning"
        if rule is None:
            generic = True
        else:
            rules.append(rule)
    if generic or not rules:
        rules.append("baremetal:node:update")
    return list(dict.fromkeys(rules))


#: What keystonemiddleware's ``auth_token`` leaves in the environ of each request it handled
#: (an environ key: no client header can set it).
TOKEN_AUTH_ENVIRON: Final = "keystone.token_auth"  # noqa: S105 - an environ key


#: A runbook PATCH path's rule (any other path: ``baremetal:runbook:update``).
RUNBOOK_PATCH_RULES: Final = (
    ("/owner", "baremetal:runbook:update:owner"),
    ("/public", "baremetal:runbook:update:public"),
)


def runbook_patch_rules(patch: Any) -> list[str]:
    """The rules a runbook JSON Patch needs, by its paths (Ironic's)."""
    rules: list[str] = []
    generic = False
    for op in patch if isinstance(patch, list) else []:
        path = str(op.get("path", "")) if isinstance(op, dict) else ""
        rule = next((name for prefix, name in RUNBOOK_PATCH_RULES if path.startswith(prefix)), None)
        if rule is None:
            generic = True
        else:
            rules.append(rule)
    if generic or not rules:
        rules.append("baremetal:runbook:update")
    return list(dict.fromkeys(rules))


class Authorizer:
    """Checks each request against :data:`ROUTES` with an oslo.policy *enforcer*.

    *enforcer*: :func:`baremetal_service.policy.make_enforcer`'s.  *service_project*:
    the project whose ``service`` role is elevated (``rule:service_role``; ``None``: none).
    *tokens_only*: check only the requests ``auth_token`` handled (:data:`TOKEN_AUTH_ENVIRON`),
    let the others through (the ``noauth`` and ``http_basic`` strategies); ``False``: every
    request (``keystone``).
    """

    def __init__(
        self, enforcer: oslo_policy.Enforcer, *, service_project: str | None = None, tokens_only: bool = False
    ) -> None:
        self.enforcer = enforcer
        self.service_project = service_project
        self.tokens_only = tokens_only

    # -- rules -------------------------------------------------------------------------------

    def allowed(self, rule: str, creds: Mapping[str, Any], target: Mapping[str, Any] | None = None) -> bool:
        """Whether *rule* allows *creds* on *target* (a token of a scope the rule does not take: no)."""
        try:
            return bool(self.enforcer.enforce(rule, {**creds, **(target or {})}, creds))
        except oslo_policy.InvalidScope:
            return False

    def require(self, rule: str, creds: Mapping[str, Any], target: Mapping[str, Any] | None = None) -> None:
        """403 ``Access was denied to the following resource: <rule>`` unless *rule* allows it."""
        if not self.allowed(rule, creds, target):
            LOG.info("policy: %s denied to %s", rule, _who(creds))
            raise exc.PolicyForbidden(rule)

    def visible(self, creds: Mapping[str, Any], target: Mapping[str, Any], not_found: Callable[[], Exception],
                rule: str = "baremetal:node:get") -> None:  # fmt: skip
        """404 (*not_found*) unless the caller may read the object (Ironic conceals it)."""
        if not self.allowed(rule, creds, target):
            raise not_found()

    # -- the request -------------------------------------------------------------------------

    def __call__(self) -> None:
        """Flask ``before_request``: check the request against its route's rule."""
        endpoint = request.endpoint
        if endpoint is None:  # no route matched: the 404/405 follows
            return
        if self.tokens_only and request.environ.get(TOKEN_AUTH_ENVIRON) is None:
            return
        method = "GET" if request.method == "HEAD" else request.method
        route = ROUTES.get(endpoint, {}).get(method)
        creds = policy.credentials(request.environ, service_project=self.service_project)
        if route is None:
            raise exc.PolicyForbidden(f"{endpoint}:{method.lower()}")
        if route.rule is None:
            return
        args = request.view_args or {}
        check = _CHECKS.get(route.kind)
        if check is None:
            self.require(route.rule, creds)
            return
        try:
            check(self, route, creds, args)
        except _Missing:
            # nothing to protect: the handler answers (its version gates first, then its 400
            # for a malformed identifier or its 404), as Ironic checks those before its rules
            return

    # -- per kind ----------------------------------------------------------------------------

    def _on_node(self, route: Route, creds: Mapping[str, Any], args: Mapping[str, Any]) -> None:
        target = node_target(_get("node", args[route.arg]))
        self.visible(creds, target, lambda: exc.NodeNotFound(args[route.arg]))
        if route.rule != "baremetal:node:get":
            self.require(str(route.rule), creds, target)

    def _node_patch(self, route: Route, creds: Mapping[str, Any], args: Mapping[str, Any]) -> None:
        target = node_target(_get("node", args[route.arg]))
        self.visible(creds, target, lambda: exc.NodeNotFound(args[route.arg]))
        for rule in patch_rules(common.json_body()):
            self.require(rule, creds, target)

    def _node_create(self, route: Route, creds: Mapping[str, Any], args: Mapping[str, Any]) -> None:
        if self.allowed("baremetal:node:create", creds):
            return
        # a project's own node (it becomes the owner: the data layer sets it)
        if creds.get("project_id") and self.allowed("baremetal:node:create:self_owned_node", creds):
            return
        self.require("baremetal:node:create", creds)

    def _node_delete(self, route: Route, creds: Mapping[str, Any], args: Mapping[str, Any]) -> None:
        target = node_target(_get("node", args[route.arg]))
        self.visible(creds, target, lambda: exc.NodeNotFound(args[route.arg]))
        if not self.allowed("baremetal:node:delete", creds, target):
            self.require("baremetal:node:delete:self_owned_node", creds, target)

    def _on_child(self, route: Route, creds: Mapping[str, Any], args: Mapping[str, Any]) -> None:
        kind = _volume_kind(args) if route.kind == "volume" else str(route.kind)
        row = _get(kind, args[route.arg])
        target = {"node.owner": row.get("_owner"), "node.lessee": row.get("_lessee")}
        self.visible(creds, target, lambda: _not_found(kind, args[route.arg]))
        self.require(str(route.rule), creds, target)

    def _create(self, route: Route, creds: Mapping[str, Any], args: Mapping[str, Any]) -> None:
        """A port, port group or volume object created on the node its body names."""
        body = common.json_body()
        ident = body.get("node_uuid") or body.get("node_ident") if isinstance(body, dict) else None
        target: dict[str, Any] = {"node.owner": None, "node.lessee": None}
        if isinstance(ident, str) and ident:
            with contextlib.suppress(exc.NotFound):  # the handler answers the unknown node
                target = node_target(service().db.get("node", ident))
        self.require(str(route.rule), creds, target)

    def _on_allocation(self, route: Route, creds: Mapping[str, Any], args: Mapping[str, Any]) -> None:
        row = _get("allocation", args[route.arg])
        target = {"allocation.owner": row.get("owner")}
        self.visible(
            creds, target, lambda: exc.AllocationNotFound(args[route.arg]), "baremetal:allocation:get"
        )
        self.require(str(route.rule), creds, target)

    def _node_allocation(self, route: Route, creds: Mapping[str, Any], args: Mapping[str, Any]) -> None:
        node = _get("node", args[route.arg])
        self.visible(creds, node_target(node), lambda: exc.NodeNotFound(args[route.arg]))
        if node.get("allocation_uuid"):
            allocation = _get("allocation", str(node["allocation_uuid"]))
            self.require(str(route.rule), creds, {"allocation.owner": allocation.get("owner")})

    def _on_runbook(self, route: Route, creds: Mapping[str, Any], args: Mapping[str, Any]) -> None:
        """Ironic's runbook checks: 403 (no concealing 404); a public runbook is everyone's to read."""
        row = _get("runbook", args[route.arg])
        target = {"runbook.owner": row.get("owner")}
        rule = str(route.rule)
        if rule == "baremetal:runbook:get" and (row.get("public") or self.allowed(rule, creds, target)):
            return
        rules = runbook_patch_rules(common.json_body()) if route.kind == "runbook_patch" else [rule]
        for name in rules:
            self.require(name, creds, target)

    def _list(self, route: Route, creds: Mapping[str, Any], args: Mapping[str, Any]) -> None:
        if route.parent == "portgroup":
            row = _get("portgroup", args["ident"])
            target = {"node.owner": row.get("_owner"), "node.lessee": row.get("_lessee")}
            self.visible(creds, target, lambda: exc.PortgroupNotFound(args["ident"]))
        elif route.parent is not None:
            target = node_target(_get("node", args[route.parent]))
            self.visible(creds, target, lambda: exc.NodeNotFound(args[route.parent]))
        if self.allowed(f"{route.rule}:list_all", creds):
            return
        if not creds.get("project_id"):  # a filtered list needs a project to filter by
            self.require(f"{route.rule}:list_all", creds)
        self.require(f"{route.rule}:list", creds)


_CHECKS: Final[
    dict[str | None, Callable[[Authorizer, Route, Mapping[str, Any], Mapping[str, Any]], None]]
] = {
    "node": Authorizer._on_node,
    "node_patch": Authorizer._node_patch,
    "node_create": Authorizer._node_create,
    "node_delete": Authorizer._node_delete,
    "port": Authorizer._on_child,
    "portgroup": Authorizer._on_child,
    "volume": Authorizer._on_child,
    "create": Authorizer._create,
    "allocation": Authorizer._on_allocation,
    "node_allocation": Authorizer._node_allocation,
    "runbook": Authorizer._on_runbook,
    "runbook_patch": Authorizer._on_runbook,
    "list": Authorizer._list,
}


def node_target(node: Mapping[str, Any]) -> dict[str, Any]:
    """The policy target of a node: its owner and lessee."""
    return {"node.owner": node.get("owner"), "node.lessee": node.get("lessee")}


class _Missing(Exception):
    """The object a rule is checked against does not exist."""


def _get(kind: str, ident: str) -> dict[str, Any]:
    """One object, unscoped (the rules decide who sees it); Ironic's ``.json`` suffix tolerated.
    :class:`_Missing` when there is none."""
    db = service().db
    try:
        return dict(db.get(kind, ident))
    except exc.NotFound:
        if not ident.endswith(".json"):
            raise _Missing(ident) from None
    try:
        return dict(db.get(kind, ident[: -len(".json")]))
    except exc.NotFound:
        raise _Missing(ident) from None


def _volume_kind(args: Mapping[str, Any]) -> str:
    return "volume_target" if args.get("what") == "targets" else "volume_connector"


def _not_found(kind: str, ident: str) -> Exception:
    return {
        "port": exc.PortNotFound,
        "portgroup": exc.PortgroupNotFound,
        "volume_connector": exc.VolumeConnectorNotFound,
        "volume_target": exc.VolumeTargetNotFound,
    }[kind](ident)


def _who(creds: Mapping[str, Any]) -> str:
    scope = "system" if creds.get("system_scope") == "all" else f"project {creds.get('project_id')}"
    roles: Iterable[str] = creds.get("roles") or ()
    return f"{scope} ({','.join(roles)})"
