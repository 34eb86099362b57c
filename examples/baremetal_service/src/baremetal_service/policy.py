"""Access rules: Ironic's secure-RBAC defaults, by name, on oslo.policy.

The rules are Ironic's (``baremetal:node:create``, ``baremetal:port:get``...), with the
check strings Ironic enforces by default, so a policy file written for Ironic means the
same here.  The personas they are built from:

==========================  ==========================================================
persona                     who
==========================  ==========================================================
system admin                ``admin`` role on a system-scoped token
system member               ``member`` on a system-scoped token (or the service role
                            of the service project, ``rule:service_role``)
system reader               ``reader`` on a system-scoped token; a system ``service``
project owner               ``admin``/``manager``/``member``/``reader`` on a token of
                            the project in the node's ``owner``
project lessee              the same roles on the project in the node's ``lessee``
service                     the ``service`` role, of the system or of the node's owner
==========================  ==========================================================

``enforce_scope`` and ``enforce_new_defaults`` are on: a token of the wrong scope for a
rule is denied (chassis, drivers and events are system-only), and the pre-RBAC legacy
rules are gone.  A policy file (``[oslo_policy] policy_file``, YAML or JSON) overrides
any rule by name.

The rules are listed to oslo.policy's tools through the entry points
``oslo.policy.policies`` (``baremetal = baremetal_service.policy:list_rules``) and
``oslo.policy.enforcer`` (``baremetal = baremetal_service.policy:get_enforcer``)::

    oslopolicy-sample-generator --namespace baremetal
    oslopolicy-policy-generator --namespace baremetal --config-file /etc/baremetal/baremetal.conf

Only the ``keystone`` auth strategy enforces them (as Ironic); ``noauth`` and
``http_basic`` callers are operators of the whole deployment.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from typing import Any, Final

from oslo_config import cfg
from oslo_context import context
from oslo_policy import opts as policy_opts
from oslo_policy import policy

__all__ = [
    "PROJECT",
    "credentials",
    "get_enforcer",
    "list_rules",
    "make_enforcer",
]

#: The oslo.config project (``--config-file`` defaults to ``/etc/baremetal/baremetal.conf``).
PROJECT: Final = "baremetal"

# -- personas (Ironic's default check strings) -------------------------------------------------

SYSTEM_ADMIN: Final = "role:admin and system_scope:all"
SYSTEM_MEMBER: Final = "(role:member and system_scope:all) or rule:service_role"
SYSTEM_READER: Final = (
    "(role:reader and system_scope:all) or (role:service and system_scope:all) or rule:service_role"
)
SYSTEM_SERVICE: Final = "role:service and system_scope:all"
PROJECT_SERVICE: Final = "role:service and project_id:%(node.owner)s"


def _on(role: str, *fields: str) -> str:
    """``role:ROLE and (project_id:%(FIELD)s or ...)``: the role on a project named by *fields*."""
    projects = " or ".join(f"project_id:%({field})s" for field in fields)
    return f"role:{role} and ({projects})" if len(fields) > 1 else f"role:{role} and {projects}"


def _any(*checks: str) -> str:
    return " or ".join(f"({check})" for check in checks)


OWNER, LESSEE = "node.owner", "node.lessee"
PROJECT_ADMIN: Final = _on("admin", OWNER)
PROJECT_MEMBER: Final = _on("member", OWNER, LESSEE)
PROJECT_READER: Final = _on("reader", OWNER, LESSEE)

SYSTEM_OR_PROJECT_MEMBER: Final = _any(SYSTEM_MEMBER, PROJECT_MEMBER, SYSTEM_SERVICE)
SYSTEM_OR_PROJECT_READER: Final = _any(SYSTEM_READER, PROJECT_READER, PROJECT_SERVICE)
#: provision state changes, VIFs, maintenance: the owner's members, the lessee's admins/managers
SYSTEM_OR_OWNER_MEMBER_AND_LESSEE_ADMIN: Final = _any(
    SYSTEM_MEMBER, SYSTEM_SERVICE, _on("member", OWNER), _on("admin", LESSEE), _on("manager", LESSEE),
    PROJECT_SERVICE,
)  # fmt: skip
#: creating and deleting ports and port groups
SYSTEM_ADMIN_OR_OWNER_ADMIN: Final = _any(
    SYSTEM_ADMIN, SYSTEM_SERVICE, _on("admin", OWNER), _on("manager", OWNER), PROJECT_SERVICE
)
#: driver interfaces, traits, boot device, updating ports
SYSTEM_MEMBER_OR_OWNER_ADMIN: Final = _any(
    SYSTEM_MEMBER, SYSTEM_SERVICE, _on("admin", OWNER), _on("manager", OWNER), PROJECT_SERVICE
)
SYSTEM_MEMBER_OR_OWNER_MEMBER: Final = _any(
    SYSTEM_MEMBER, SYSTEM_SERVICE, _on("member", OWNER), PROJECT_SERVICE
)
SYSTEM_OR_OWNER_READER: Final = _any(SYSTEM_READER, SYSTEM_SERVICE, _on("reader", OWNER), PROJECT_SERVICE)
#: volume connectors and targets
SYSTEM_MEMBER_OR_OWNER_LESSEE_ADMIN: Final = _any(
    SYSTEM_MEMBER, SYSTEM_SERVICE, _on("admin", OWNER), _on("manager", OWNER), _on("admin", LESSEE),
    _on("manager", LESSEE), PROJECT_SERVICE,
)  # fmt: skip
ALLOCATION_MEMBER: Final = _any(SYSTEM_MEMBER, _on("member", "allocation.owner"))
ALLOCATION_READER: Final = _any(SYSTEM_READER, _on("reader", "allocation.owner"))
ALLOCATION_CREATOR: Final = _any(SYSTEM_MEMBER, "role:member")
RUNBOOK_ADMIN: Final = _any(SYSTEM_MEMBER, _on("manager", "runbook.owner"), "role:service")
RUNBOOK_READER: Final = _any(SYSTEM_READER, _on("reader", "runbook.owner"), "role:service")
RUNBOOK_CREATOR: Final = _any(SYSTEM_MEMBER, "role:manager", "role:service")
#: any reader: lists (filtered to the caller's project unless ``list_all`` allows more)
API_READER: Final = "(role:reader) or (role:service)"
TARGET_PROPERTIES_READER: Final = _any(SYSTEM_READER, "role:admin")

_BOTH: Final = ("system", "project")
_SYSTEM: Final = ("system",)

# (name, check string, scope types, description, [(method, path)...])
_Row = tuple[str, str, Sequence[str], str, Sequence[tuple[str, str]]]
_NODE: Final = "/nodes/{node_ident}"

_RULES: Final[list[_Row]] = [
    # nodes
    ("baremetal:node:create", _any(SYSTEM_ADMIN, SYSTEM_SERVICE), _BOTH, "Create Node records",
     [("POST", "/nodes")]),
    ("baremetal:node:create:self_owned_node", "(role:admin) or (role:service)", _BOTH,
     "Create node records owned by the caller's project", [("POST", "/nodes")]),
    ("baremetal:node:list", API_READER, _BOTH,
     "Retrieve multiple Node records, filtered by the caller's project",
     [("GET", "/nodes"), ("GET", "/nodes/detail")]),
    ("baremetal:node:list_all", SYSTEM_READER, _BOTH, "Retrieve multiple Node records",
     [("GET", "/nodes"), ("GET", "/nodes/detail")]),
    ("baremetal:node:get", SYSTEM_OR_PROJECT_READER, _BOTH, "Retrieve a single Node record",
     [("GET", _NODE)]),
    ("baremetal:node:get:filter_threshold", SYSTEM_READER, _BOTH,
     "Callers below it get node fields filtered by the rules below", [("GET", _NODE)]),
    ("baremetal:node:get:last_error", SYSTEM_OR_OWNER_READER, _BOTH, "Show the node's last_error",
     [("GET", _NODE)]),
    ("baremetal:node:get:reservation", SYSTEM_OR_OWNER_READER, _BOTH, "Show the node's reservation",
     [("GET", _NODE)]),
    ("baremetal:node:get:driver_internal_info", SYSTEM_OR_OWNER_READER, _BOTH,
     "Show the node's driver_internal_info", [("GET", _NODE)]),
    ("baremetal:node:get:driver_info", SYSTEM_OR_OWNER_READER, _BOTH, "Show the node's driver_info",
     [("GET", _NODE)]),
    *[
        (f"baremetal:node:update:{field}", check, _BOTH, f"Update the node's {field}", [("PATCH", _NODE)])
        for field, check in (
            ("driver_info", SYSTEM_MEMBER_OR_OWNER_MEMBER),
            ("properties", SYSTEM_MEMBER_OR_OWNER_MEMBER),
            ("chassis_uuid", SYSTEM_ADMIN),
            ("instance_uuid", SYSTEM_MEMBER_OR_OWNER_MEMBER),
            ("lessee", SYSTEM_MEMBER_OR_OWNER_MEMBER),
            ("owner", SYSTEM_MEMBER),
            ("driver_interfaces", SYSTEM_MEMBER_OR_OWNER_ADMIN),
            ("network_data", SYSTEM_MEMBER_OR_OWNER_MEMBER),
            ("conductor_group", SYSTEM_MEMBER),
            ("name", SYSTEM_MEMBER_OR_OWNER_MEMBER),
            ("retired", SYSTEM_MEMBER_OR_OWNER_MEMBER),
            ("shard", SYSTEM_ADMIN),
            ("parent_node", SYSTEM_MEMBER),
            ("disable_power_off", SYSTEM_ADMIN),
        )
    ],
    ("baremetal:node:update", SYSTEM_OR_PROJECT_MEMBER, _BOTH, "Generalized update of node records",
     [("PATCH", _NODE)]),
    ("baremetal:node:update_extra", SYSTEM_OR_PROJECT_MEMBER, _BOTH, "Update the node's extra",
     [("PATCH", _NODE)]),
    ("baremetal:node:update_instance_info", SYSTEM_OR_OWNER_MEMBER_AND_LESSEE_ADMIN, _BOTH,
     "Update the node's instance_info", [("PATCH", _NODE)]),
    ("baremetal:node:update_owner_provisioned", SYSTEM_ADMIN, _SYSTEM,
     "Update the owner of a provisioned node", [("PATCH", _NODE)]),
    ("baremetal:node:delete", SYSTEM_ADMIN, _BOTH, "Delete Node records", [("DELETE", _NODE)]),
    ("baremetal:node:delete:self_owned_node", PROJECT_ADMIN, _BOTH,
     "Delete node records owned by the caller's project", [("DELETE", _NODE)]),
    ("baremetal:node:validate", SYSTEM_OR_OWNER_MEMBER_AND_LESSEE_ADMIN, _BOTH,
     "Request active validation of Nodes", [("GET", f"{_NODE}/validate")]),
    ("baremetal:node:set_maintenance", SYSTEM_OR_OWNER_MEMBER_AND_LESSEE_ADMIN, _BOTH,
     "Set the maintenance flag", [("PUT", f"{_NODE}/maintenance")]),
    ("baremetal:node:clear_maintenance", SYSTEM_OR_OWNER_MEMBER_AND_LESSEE_ADMIN, _BOTH,
     "Clear the maintenance flag", [("DELETE", f"{_NODE}/maintenance")]),
    ("baremetal:node:get_boot_device", SYSTEM_MEMBER_OR_OWNER_ADMIN, _BOTH, "Retrieve the boot device",
     [("GET", f"{_NODE}/management/boot_device"), ("GET", f"{_NODE}/management/boot_device/supported")]),
    ("baremetal:node:set_boot_device", SYSTEM_MEMBER_OR_OWNER_ADMIN, _BOTH, "Change the boot device",
     [("PUT", f"{_NODE}/management/boot_device")]),
    ("baremetal:node:get_indicator_state", SYSTEM_OR_PROJECT_READER, _BOTH, "Retrieve indicators",
     [("GET", f"{_NODE}/management/indicators")]),
    ("baremetal:node:set_indicator_state", SYSTEM_MEMBER_OR_OWNER_MEMBER, _BOTH, "Change an indicator",
     [("PUT", f"{_NODE}/management/indicators/{{component}}/{{indicator}}")]),
    ("baremetal:node:inject_nmi", SYSTEM_MEMBER_OR_OWNER_ADMIN, _BOTH, "Inject an NMI",
     [("PUT", f"{_NODE}/management/inject_nmi")]),
    ("baremetal:node:get_states", SYSTEM_OR_PROJECT_READER, _BOTH, "View power and provision state",
     [("GET", f"{_NODE}/states")]),
    ("baremetal:node:set_power_state", SYSTEM_OR_PROJECT_MEMBER, _BOTH, "Change the power state",
     [("PUT", f"{_NODE}/states/power")]),
    ("baremetal:node:set_boot_mode", SYSTEM_OR_PROJECT_MEMBER, _BOTH, "Change the boot mode",
     [("PUT", f"{_NODE}/states/boot_mode")]),
    ("baremetal:node:set_secure_boot", SYSTEM_OR_PROJECT_MEMBER, _BOTH, "Change secure boot",
     [("PUT", f"{_NODE}/states/secure_boot")]),
    ("baremetal:node:set_provision_state", SYSTEM_OR_OWNER_MEMBER_AND_LESSEE_ADMIN, _BOTH,
     "Change the provision state", [("PUT", f"{_NODE}/states/provision")]),
    ("baremetal:node:set_provision_state:clean_steps", SYSTEM_OR_OWNER_MEMBER_AND_LESSEE_ADMIN, _BOTH,
     "Run arbitrary clean steps", [("PUT", f"{_NODE}/states/provision")]),
    ("baremetal:node:set_provision_state:service_steps", SYSTEM_OR_OWNER_MEMBER_AND_LESSEE_ADMIN, _BOTH,
     "Run arbitrary service steps", [("PUT", f"{_NODE}/states/provision")]),
    ("baremetal:node:set_raid_state", SYSTEM_MEMBER_OR_OWNER_MEMBER, _BOTH, "Change the RAID configuration",
     [("PUT", f"{_NODE}/states/raid")]),
    ("baremetal:node:get_console", SYSTEM_MEMBER_OR_OWNER_MEMBER, _BOTH, "Get console information",
     [("GET", f"{_NODE}/states/console")]),
    ("baremetal:node:set_console_state", SYSTEM_MEMBER_OR_OWNER_MEMBER, _BOTH, "Change the console state",
     [("PUT", f"{_NODE}/states/console")]),
    ("baremetal:node:vif:list", SYSTEM_OR_PROJECT_READER, _BOTH, "List VIFs", [("GET", f"{_NODE}/vifs")]),
    ("baremetal:node:vif:attach", SYSTEM_OR_OWNER_MEMBER_AND_LESSEE_ADMIN, _BOTH, "Attach a VIF",
     [("POST", f"{_NODE}/vifs")]),
    ("baremetal:node:vif:detach", SYSTEM_OR_OWNER_MEMBER_AND_LESSEE_ADMIN, _BOTH, "Detach a VIF",
     [("DELETE", f"{_NODE}/vifs/{{node_vif_ident}}")]),
    ("baremetal:node:traits:list", SYSTEM_OR_PROJECT_READER, _BOTH, "List node traits",
     [("GET", f"{_NODE}/traits")]),
    ("baremetal:node:traits:set", SYSTEM_MEMBER_OR_OWNER_ADMIN, _BOTH, "Add or replace node traits",
     [("PUT", f"{_NODE}/traits"), ("PUT", f"{_NODE}/traits/{{trait}}")]),
    ("baremetal:node:traits:delete", SYSTEM_MEMBER_OR_OWNER_ADMIN, _BOTH, "Remove node traits",
     [("DELETE", f"{_NODE}/traits"), ("DELETE", f"{_NODE}/traits/{{trait}}")]),
    ("baremetal:node:bios:get", SYSTEM_OR_PROJECT_READER, _BOTH, "Retrieve BIOS settings",
     [("GET", f"{_NODE}/bios"), ("GET", f"{_NODE}/bios/{{setting}}")]),
    ("baremetal:node:disable_cleaning", SYSTEM_ADMIN, _BOTH, "Disable automated cleaning",
     [("PATCH", _NODE)]),
    ("baremetal:node:history:get", SYSTEM_OR_OWNER_READER, _BOTH, "Retrieve node history",
     [("GET", f"{_NODE}/history"), ("GET", f"{_NODE}/history/{{event_ident}}")]),
    ("baremetal:node:inventory:get", SYSTEM_OR_OWNER_READER, _BOTH, "Retrieve inspection data",
     [("GET", f"{_NODE}/inventory")]),
    ("baremetal:shards:get", SYSTEM_READER, _BOTH, "Retrieve shards", [("GET", "/shards")]),
    ("baremetal:node:firmware:get", SYSTEM_OR_PROJECT_READER, _BOTH, "Retrieve firmware components",
     [("GET", f"{_NODE}/firmware")]),
    ("baremetal:node:vmedia:attach", SYSTEM_OR_PROJECT_MEMBER, _BOTH, "Attach virtual media",
     [("POST", f"{_NODE}/vmedia")]),
    ("baremetal:node:vmedia:detach", SYSTEM_OR_PROJECT_MEMBER, _BOTH, "Detach virtual media",
     [("DELETE", f"{_NODE}/vmedia")]),
    ("baremetal:node:vmedia:get", SYSTEM_OR_PROJECT_READER, _BOTH, "Get virtual media",
     [("GET", f"{_NODE}/vmedia")]),
    ("baremetal:node:vendor_passthru", SYSTEM_ADMIN, _BOTH, "Vendor-specific node functions",
     [("GET", f"{_NODE}/vendor_passthru/methods")]),
    ("baremetal:node:ipa_heartbeat", "", _BOTH, "Heartbeats from the ramdisk",
     [("POST", "/heartbeat/{node_ident}")]),
    ("baremetal:driver:ipa_lookup", "", _BOTH, "The ramdisk's lookup", [("GET", "/lookup")]),
    ("baremetal:driver:ipa_continue_inspection", "", _BOTH, "Inspection data from the ramdisk",
     [("POST", "/continue_inspection")]),
    # ports and port groups
    ("baremetal:port:get", SYSTEM_OR_PROJECT_READER, _BOTH, "Retrieve Port records",
     [("GET", "/ports/{port_id}"), ("GET", f"{_NODE}/ports")]),
    ("baremetal:port:list", API_READER, _BOTH, "Retrieve Port records, filtered by the caller's project",
     [("GET", "/ports"), ("GET", "/ports/detail")]),
    ("baremetal:port:list_all", SYSTEM_READER, _BOTH, "Retrieve multiple Port records",
     [("GET", "/ports"), ("GET", "/ports/detail")]),
    ("baremetal:port:create", SYSTEM_ADMIN_OR_OWNER_ADMIN, _BOTH, "Create Port records",
     [("POST", "/ports")]),
    ("baremetal:port:delete", SYSTEM_ADMIN_OR_OWNER_ADMIN, _BOTH, "Delete Port records",
     [("DELETE", "/ports/{port_id}")]),
    ("baremetal:port:update", SYSTEM_MEMBER_OR_OWNER_ADMIN, _BOTH, "Update Port records",
     [("PATCH", "/ports/{port_id}")]),
    ("baremetal:portgroup:get", SYSTEM_OR_PROJECT_READER, _BOTH, "Retrieve Portgroup records",
     [("GET", "/portgroups/{portgroup_ident}"), ("GET", f"{_NODE}/portgroups")]),
    ("baremetal:portgroup:create", SYSTEM_ADMIN_OR_OWNER_ADMIN, _BOTH, "Create Portgroup records",
     [("POST", "/portgroups")]),
    ("baremetal:portgroup:delete", SYSTEM_ADMIN_OR_OWNER_ADMIN, _BOTH, "Delete Portgroup records",
     [("DELETE", "/portgroups/{portgroup_ident}")]),
    ("baremetal:portgroup:update", SYSTEM_MEMBER_OR_OWNER_ADMIN, _BOTH, "Update Portgroup records",
     [("PATCH", "/portgroups/{portgroup_ident}")]),
    ("baremetal:portgroup:list", API_READER, _BOTH,
     "Retrieve Portgroup records, filtered by the caller's project",
     [("GET", "/portgroups"), ("GET", "/portgroups/detail")]),
    ("baremetal:portgroup:list_all", SYSTEM_READER, _BOTH, "Retrieve multiple Portgroup records",
     [("GET", "/portgroups"), ("GET", "/portgroups/detail")]),
    # chassis, drivers, events, conductors
    ("baremetal:chassis:get", SYSTEM_READER, _SYSTEM, "Retrieve Chassis records",
     [("GET", "/chassis"), ("GET", "/chassis/{chassis_id}")]),
    ("baremetal:chassis:create", SYSTEM_ADMIN, _SYSTEM, "Create Chassis records", [("POST", "/chassis")]),
    ("baremetal:chassis:delete", SYSTEM_ADMIN, _SYSTEM, "Delete Chassis records",
     [("DELETE", "/chassis/{chassis_id}")]),
    ("baremetal:chassis:update", SYSTEM_MEMBER, _SYSTEM, "Update Chassis records",
     [("PATCH", "/chassis/{chassis_id}")]),
    ("baremetal:driver:get", SYSTEM_READER, _SYSTEM, "View the available drivers",
     [("GET", "/drivers"), ("GET", "/drivers/{driver_name}")]),
    ("baremetal:driver:get_properties", SYSTEM_READER, _SYSTEM, "View driver properties",
     [("GET", "/drivers/{driver_name}/properties")]),
    ("baremetal:driver:get_raid_logical_disk_properties", SYSTEM_READER, _SYSTEM,
     "View driver RAID properties", [("GET", "/drivers/{driver_name}/raid/logical_disk_properties")]),
    ("baremetal:driver:vendor_passthru", SYSTEM_ADMIN, _SYSTEM, "Vendor-specific driver functions",
     [("GET", "/drivers/{driver_name}/vendor_passthru/methods")]),
    ("baremetal:events:post", SYSTEM_ADMIN, _SYSTEM, "Post events", [("POST", "/events")]),
    ("baremetal:conductor:get", SYSTEM_READER, _BOTH, "Retrieve Conductor records",
     [("GET", "/conductors"), ("GET", "/conductors/{hostname}")]),
    # volume connectors and targets
    ("baremetal:volume:list_all", SYSTEM_READER, _BOTH, "Retrieve all volume connectors and targets",
     [("GET", "/volume/connectors"), ("GET", "/volume/targets")]),
    ("baremetal:volume:list", API_READER, _BOTH,
     "Retrieve volume connectors and targets, filtered by the caller's project",
     [("GET", "/volume/connectors"), ("GET", "/volume/targets")]),
    ("baremetal:volume:get", SYSTEM_OR_PROJECT_READER, _BOTH, "Retrieve volume connectors and targets",
     [("GET", "/volume/connectors/{volume_connector_id}"), ("GET", "/volume/targets/{volume_target_id}")]),
    ("baremetal:volume:create", SYSTEM_MEMBER_OR_OWNER_LESSEE_ADMIN, _BOTH,
     "Create volume connectors and targets", [("POST", "/volume/connectors"), ("POST", "/volume/targets")]),
    ("baremetal:volume:delete", SYSTEM_MEMBER_OR_OWNER_LESSEE_ADMIN, _BOTH,
     "Delete volume connectors and targets",
     [("DELETE", "/volume/connectors/{volume_connector_id}"),
      ("DELETE", "/volume/targets/{volume_target_id}")]),
    ("baremetal:volume:update", SYSTEM_OR_OWNER_MEMBER_AND_LESSEE_ADMIN, _BOTH,
     "Update volume connectors and targets",
     [("PATCH", "/volume/connectors/{volume_connector_id}"),
      ("PATCH", "/volume/targets/{volume_target_id}")]),
    ("baremetal:volume:view_target_properties", TARGET_PROPERTIES_READER, _BOTH,
     "View volume target properties", [("GET", "/volume/targets/{volume_target_id}")]),
    # allocations
    ("baremetal:allocation:get", ALLOCATION_READER, _BOTH, "Retrieve Allocation records",
     [("GET", "/allocations/{allocation_id}"), ("GET", f"{_NODE}/allocation")]),
    ("baremetal:allocation:list", API_READER, _BOTH,
     "Retrieve Allocation records, filtered by the caller's project", [("GET", "/allocations")]),
    ("baremetal:allocation:list_all", SYSTEM_READER, _BOTH, "Retrieve multiple Allocation records",
     [("GET", "/allocations")]),
    ("baremetal:allocation:create", ALLOCATION_CREATOR, _BOTH, "Create Allocation records",
     [("POST", "/allocations")]),
    ("baremetal:allocation:create_restricted", SYSTEM_MEMBER, _BOTH,
     "Create Allocation records with a specific owner", [("POST", "/allocations")]),
    ("baremetal:allocation:delete", ALLOCATION_MEMBER, _BOTH, "Delete Allocation records",
     [("DELETE", "/allocations/{allocation_id}"), ("DELETE", f"{_NODE}/allocation")]),
    ("baremetal:allocation:update", ALLOCATION_MEMBER, _BOTH, "Change an allocation's name and extra",
     [("PATCH", "/allocations/{allocation_id}")]),
    # deploy templates, runbooks, inspection rules
    ("baremetal:deploy_template:get", SYSTEM_READER, _BOTH, "Retrieve Deploy Template records",
     [("GET", "/deploy_templates"), ("GET", "/deploy_templates/{deploy_template_ident}")]),
    ("baremetal:deploy_template:create", SYSTEM_ADMIN, _BOTH, "Create Deploy Template records",
     [("POST", "/deploy_templates")]),
    ("baremetal:deploy_template:delete", SYSTEM_ADMIN, _BOTH, "Delete Deploy Template records",
     [("DELETE", "/deploy_templates/{deploy_template_ident}")]),
    ("baremetal:deploy_template:update", SYSTEM_ADMIN, _BOTH, "Update Deploy Template records",
     [("PATCH", "/deploy_templates/{deploy_template_ident}")]),
    ("baremetal:runbook:get", RUNBOOK_READER, _BOTH, "Retrieve a runbook",
     [("GET", "/runbooks/{runbook_ident}")]),
    ("baremetal:runbook:list", API_READER, _BOTH, "Retrieve runbooks, filtered by the caller's project",
     [("GET", "/runbooks")]),
    ("baremetal:runbook:list_all", SYSTEM_READER, _BOTH, "Retrieve all runbooks", [("GET", "/runbooks")]),
    ("baremetal:runbook:create", RUNBOOK_CREATOR, _BOTH, "Create runbooks", [("POST", "/runbooks")]),
    ("baremetal:runbook:delete", RUNBOOK_ADMIN, _BOTH, "Delete a runbook",
     [("DELETE", "/runbooks/{runbook_ident}")]),
    ("baremetal:runbook:update", RUNBOOK_ADMIN, _BOTH, "Update a runbook",
     [("PATCH", "/runbooks/{runbook_ident}")]),
    ("baremetal:runbook:update:public", SYSTEM_MEMBER, _BOTH, "Set or unset a runbook as public",
     [("PATCH", "/runbooks/{runbook_ident}/public")]),
    ("baremetal:runbook:update:owner", SYSTEM_MEMBER, _BOTH, "Set or unset a runbook's owner",
     [("PATCH", "/runbooks/{runbook_ident}/owner")]),
    ("baremetal:runbook:use", RUNBOOK_ADMIN, _BOTH, "Use a runbook for node operations",
     [("PUT", f"{_NODE}/states/provision")]),
    # resource classes (this service's own resource; Ironic has none)
    ("baremetal:resource_class:get", API_READER, _BOTH, "Retrieve resource classes",
     [("GET", "/resource_classes"), ("GET", "/resource_classes/{name}")]),
    ("baremetal:resource_class:create", SYSTEM_ADMIN, _BOTH, "Create resource classes",
     [("POST", "/resource_classes")]),
    ("baremetal:resource_class:update", SYSTEM_ADMIN, _BOTH, "Replace a resource class",
     [("PUT", "/resource_classes/{name}")]),
    ("baremetal:resource_class:delete", SYSTEM_ADMIN, _BOTH, "Delete a resource class",
     [("DELETE", "/resource_classes/{name}")]),
    ("baremetal:inspection_rule:get", SYSTEM_READER, _BOTH, "Get inspection rules",
     [("GET", "/inspection_rules"), ("GET", "/inspection_rules/{rule_id}")]),
    ("baremetal:inspection_rule:list_all", SYSTEM_READER, _BOTH, "Retrieve all inspection rules",
     [("GET", "/inspection_rules")]),
    ("baremetal:inspection_rule:create", SYSTEM_ADMIN, _BOTH, "Create inspection rules",
     [("POST", "/inspection_rules")]),
    ("baremetal:inspection_rule:update", SYSTEM_ADMIN, _BOTH, "Update an inspection rule",
     [("PATCH", "/inspection_rules/{rule_id}")]),
    ("baremetal:inspection_rule:delete", SYSTEM_ADMIN, _BOTH, "Delete inspection rules",
     [("DELETE", "/inspection_rules"), ("DELETE", "/inspection_rules/{rule_id}")]),
]  # fmt: skip


def list_rules() -> list[policy.RuleDefault]:
    """Every rule with its default (the ``oslo.policy.policies`` entry point)."""
    base = [
        policy.RuleDefault(
            "service_role",
            "role:service and project_name:%(config.service_project_name)s",
            description="The service role of the service project (cross-service access).",
        ),
        policy.RuleDefault(
            "show_password", "!", description="Show secrets within node driver_info (the utmost care)."
        ),
        policy.RuleDefault(
            "show_instance_secrets", "!", description="Show secrets within node instance_info."
        ),
    ]
    documented = [
        policy.DocumentedRuleDefault(
            name=name,
            check_str=check,
            scope_types=list(scopes),
            description=description,
            operations=[{"path": path, "method": method} for method, path in operations],
        )
        for name, check, scopes, description, operations in _RULES
    ]
    return [*base, *documented]


def make_enforcer(conf: cfg.ConfigOpts | None = None, *, policy_file: str | None = None) -> policy.Enforcer:
    """An enforcer with the rules registered, ``enforce_scope`` and ``enforce_new_defaults`` on
    (unless *conf*'s ``[oslo_policy]`` says otherwise), reading *policy_file* (else the
    ``[oslo_policy] policy_file`` of *conf*) when it exists."""
    if conf is None:
        conf = cfg.ConfigOpts()
        conf([], project=PROJECT, default_config_files=[])
    policy_opts.set_defaults(conf, enforce_scope=True, enforce_new_defaults=True)
    enforcer = policy.Enforcer(conf, policy_file=policy_file)
    enforcer.register_defaults(list_rules())
    return enforcer


def get_enforcer() -> policy.Enforcer:
    """The ``oslo.policy.enforcer`` entry point (``oslopolicy-policy-generator``): the
    configuration from the command line, less the generator's own options."""
    argv: list[str] = []
    args = iter(sys.argv[1:])
    for arg in args:
        name = arg.split("=", 1)[0].lstrip("-")
        if name in ("namespace", "output-file", "output_file"):
            if "=" not in arg:
                next(args, None)
            continue
        argv.append(arg)
    conf = cfg.ConfigOpts()
    conf(argv, project=PROJECT, default_config_files=[])
    return make_enforcer(conf)


def credentials(environ: Mapping[str, Any], *, service_project: str | None = None) -> dict[str, Any]:
    """The caller's policy values from the identity headers keystonemiddleware's ``auth_token``
    set (``X-Roles``, ``X-Project-Id``, ``OpenStack-System-Scope``...), read by oslo.context.

    *service_project*: the project whose ``service`` role ``rule:service_role`` elevates
    (Ironic's ``rbac_service_project_name`` with ``rbac_service_role_elevated_access``);
    ``None``, the default as on Ironic: no project's.
    """
    values = dict(context.RequestContext.from_environ(environ).to_policy_values())
    if service_project:
        values["config.service_project_name"] = service_project
    return values
