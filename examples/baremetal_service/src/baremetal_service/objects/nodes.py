"""Nodes: their own controller (:mod:`baremetal_service.handlers.nodes`) and state machinery
(:mod:`baremetal_service.objects.service`, :mod:`baremetal_service.conductor`).

The declaration (:data:`NODES`) states their field/version table, list fields, schema,
patchable fields, sort keys and filters in the same form as every other resource; the
node controller reads the same tables, so the two cannot disagree.

Per-node features beyond CRUD: traits, VIFs, virtual media, firmware, retirement,
instance names.
:class:`NodeFeatures` is reached as ``service.node_features`` (the facade builds
it); the API module :mod:`baremetal_service.handlers.node_features` calls it.  Every
write is an ordinary node write (:meth:`Database.update`: one compare-and-swap
UPDATE, the etag recomputed, an event recorded), so a trait change moves the
node's etag and honours If-Match exactly like a PATCH.

Ironic's rules, as Ironic 39.0 answers them:

* **traits** (1.37): ``CUSTOM_[A-Z0-9_]+`` or a standard os-traits name, 1..255
  characters; at most 50 per node; the list is kept sorted and without
  duplicates; removing a trait the node lacks is 404 ``baremetal.node-trait-not-found``.
  Setting and removing need the node's owner (a lessee gets 403,
  ``baremetal:node:traits:set`` / ``...:delete``).
* **VIFs** (1.28): the fake hardware's ``noop`` network interface, like
  Ironic's, accepts attach and detach and lists nothing (Ironic's ``noop`` keeps
  no record); the node must exist and be visible to the caller.
* **virtual media** (1.89): attach and detach are accepted for ``disk``,
  ``cdrom`` and ``floppy`` with an http(s)/nfs/cifs/smb URL; the fake hardware
  keeps no record.
* **firmware components** (1.86): the fake hardware has none (``[]``).
* **retirement** (1.61): ``retired=true`` is refused in ``available`` (409
  ``baremetal.invalid-state``); ``retired=false`` clears ``retired_reason``; a
  reason without ``retired`` is 400; a retired node cannot be provided (400
  ``baremetal.node-retired``).
* **protection** (1.48): ``protected=true`` only in ``active`` or ``rescue`` (409
  ``baremetal.invalid-state``); ``protected=false`` clears ``protected_reason``; a reason
  without ``protected`` is 400.
* **instance names** (1.104): an ``instance_info`` change carrying
  ``display_name`` fills ``instance_name`` when the node has none.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, Final
from urllib.parse import urlparse

from apimw import Version
from baremetal_service import exceptions as exc
from baremetal_service import schemas, versions
from baremetal_service.db.api import IfMatchArg
from baremetal_service.objects.resource import Resource
from baremetal_service.objects.traits import STANDARD_TRAITS
from baremetal_service.versions import ETAG_VERSION, FIRST, Fields

__all__ = [
    "CUSTOM_TRAIT_RE",
    "DECLARED",
    "FILTERS",
    "FLAGS",
    "MAX_TRAITS_PER_NODE",
    "NODES",
    "NODE_FIELDS",
    "NODE_LIST_FIELDS",
    "NODE_SUBLINKS",
    "NodeFeatures",
    "NodeIsRetired",
    "NodeTraitNotFound",
    "PATCHABLE",
    "RetiredInAvailable",
    "SORT_KEYS",
    "UUID_FILTERS",
    "VMEDIA_DEVICES",
    "check_provision",
    "node_change_rules",
    "trait_error",
]

#: Ironic's node fields and the version each appears in (Ironic's VERSIONED_FIELDS).
NODE_FIELDS: Final = Fields({
    "uuid": FIRST, "created_at": FIRST, "updated_at": FIRST, "automated_clean": Version(1, 47),
    "bios_interface": Version(1, 40), "boot_interface": Version(1, 31), "boot_mode": Version(1, 75),
    "clean_step": Version(1, 7), "conductor_group": Version(1, 46), "console_enabled": FIRST,
    "console_interface": Version(1, 31), "disable_power_off": Version(1, 95),
    "deploy_interface": Version(1, 31), "deploy_step": Version(1, 44), "description": Version(1, 51),
    "driver": FIRST, "driver_info": FIRST, "driver_internal_info": Version(1, 3), "extra": FIRST,
    "fault": Version(1, 42), "firmware_interface": Version(1, 86), "health": Version(1, 109),
    "inspection_finished_at": Version(1, 6), "inspection_started_at": Version(1, 6),
    "inspect_interface": Version(1, 31), "instance_info": FIRST, "instance_name": Version(1, 104),
    "instance_uuid": FIRST, "last_error": FIRST, "lessee": Version(1, 65), "maintenance": FIRST,
    "maintenance_reason": FIRST, "management_interface": Version(1, 31), "name": Version(1, 5),
    "network_data": Version(1, 66), "network_interface": Version(1, 20), "owner": Version(1, 50),
    "parent_node": Version(1, 83), "power_interface": Version(1, 31), "power_state": FIRST,
    "properties": FIRST, "protected": Version(1, 48), "protected_reason": Version(1, 48),
    "provision_state": FIRST, "provision_updated_at": FIRST, "raid_config": Version(1, 12),
    "raid_interface": Version(1, 31), "rescue_interface": Version(1, 38), "reservation": FIRST,
    "resource_class": Version(1, 21), "retired": Version(1, 61), "retired_reason": Version(1, 61),
    "secure_boot": Version(1, 75), "service_step": Version(1, 87), "shard": Version(1, 82),
    "storage_interface": Version(1, 33), "target_power_state": FIRST, "target_provision_state": FIRST,
    "target_raid_config": Version(1, 12), "traits": Version(1, 37), "vendor_interface": Version(1, 31),
    "links": FIRST, "conductor": Version(1, 49), "allocation_uuid": Version(1, 52),
    "chassis_uuid": FIRST, "ports": FIRST, "states": Version(1, 14), "portgroups": Version(1, 24),
    "volume": Version(1, 32), "etag": ETAG_VERSION,
})  # fmt: skip

#: Fields a node list shows without ?fields= (Ironic's default list fields).
NODE_LIST_FIELDS: Final = ("instance_uuid", "maintenance", "power_state", "provision_state", "uuid", "name")
#: Node fields that are links to sub-resources rather than data.
NODE_SUBLINKS: Final = frozenset({"ports", "states", "portgroups", "volume"})

#: Fields a PATCH may change (Ironic's list, as far as this service stores them).
PATCHABLE = (
    "automated_clean", "bios_interface", "boot_interface", "chassis_uuid", "conductor_group",
    "console_interface", "deploy_interface", "description", "disable_power_off", "driver",
    "driver_info", "extra", "inspect_interface", "instance_info", "instance_name", "instance_uuid",
    "lessee", "maintenance", "management_interface", "name", "network_data", "network_interface",
    "owner", "power_interface", "properties", "protected", "protected_reason", "raid_interface",
    "rescue_interface", "resource_class", "retired", "retired_reason", "shard", "storage_interface",
    "vendor_interface", "parent_node", "firmware_interface",
)  # fmt: skip

SORT_KEYS = (
    "uuid", "name", "created_at", "updated_at", "provision_state", "power_state", "driver",
    "resource_class", "maintenance", "instance_uuid", "conductor_group", "owner",
)  # fmt: skip


def _since(field: str) -> Version:
    """The version that shows node *field*; a list filter by the field is accepted from it too."""
    return NODE_FIELDS.since(field) or versions.FIRST


def _by_field(*fields: str) -> tuple[tuple[str, Version], ...]:
    """Filters named as the node field they filter by, each with the field's version."""
    return tuple((field, _since(field)) for field in fields)


#: List filters and the version each is accepted from.
FILTERS: tuple[tuple[str, Version], ...] = (
    ("provision_state", versions.PROVISION_STATE_FILTER),
    ("driver", versions.DRIVER_FILTER),
    *_by_field("resource_class", "conductor_group", "conductor", "owner", "lessee"),
    ("project", versions.FIRST),  # owner or lessee; Ironic gates it by policy only
    *_by_field("shard", "parent_node", "fault"),
    ("description_contains", _since("description")),
    *_by_field("instance_name"),
)
#: Filters by a related resource's UUID (checked as a UUID) and the version each is accepted from.
UUID_FILTERS: tuple[tuple[str, Version], ...] = _by_field("chassis_uuid", "instance_uuid")
#: Boolean filters and the version each is accepted from.
FLAGS: tuple[tuple[str, Version], ...] = (
    *_by_field("maintenance"),
    ("associated", versions.FIRST),
    *_by_field("retired"),
    ("sharded", _since("shard")),
    ("include_children", _since("parent_node")),
)


NODES: Final = Resource(
    kind="node",
    fields=NODE_FIELDS,
    list_fields=NODE_LIST_FIELDS,
    create_schema=schemas.NODE_CREATE,
    patchable=PATCHABLE,
    sort_keys=SORT_KEYS,
    filters=(*FILTERS, *UUID_FILTERS),
    bool_filters=FLAGS,
    sublinks=tuple(sorted(NODE_SUBLINKS)),
    scope="node",
    policy="baremetal:node",
    relations={"chassis_uuid": "chassis"},
    etag_ignored=frozenset({"etag", "updated_at", "driver_internal_info", "reservation"}),
    own_controller=True,
    routes=False,
)
DECLARED: Final = (NODES,)


CUSTOM_TRAIT_RE: Final = re.compile(r"^CUSTOM_[A-Z0-9_]+\Z")
TRAIT_MAX_LENGTH: Final = 255
#: Ironic's ``MAX_TRAITS_PER_NODE``.
MAX_TRAITS_PER_NODE: Final = 50
VMEDIA_DEVICES: Final = ("disk", "cdrom", "floppy")
VMEDIA_URL_SCHEMES: Final = ("http", "https", "nfs", "cifs", "smb")
_UNRESERVED: Final = {"reservation": None}


class NodeTraitNotFound(exc.NotFound):
    error_code = "baremetal.node-trait-not-found"

    def __init__(self, node: str, trait: str) -> None:
        super().__init__(f"Node {node} doesn't have a trait '{exc.cut(trait)}'", node=node)


class TooManyTraits(exc.Invalid):
    error_code = "baremetal.too-many-traits"

    def __init__(self, node: str, count: int) -> None:
        super().__init__(
            f"Could not modify traits for node {node} as it would exceed the maximum number of "
            f"traits per node ({count} vs. {MAX_TRAITS_PER_NODE})",
            max_traits=MAX_TRAITS_PER_NODE,
        )


#: The provision states in which a node may be made protected (Ironic's).
PROTECTED_STATES: Final = ("active", "rescue")


class ProtectedInState(exc.Conflict):
    error_code = "baremetal.invalid-state"

    def __init__(self, node: str, state: str) -> None:
        super().__init__(
            f"Node {node} can only be made protected in provision states 'active' or 'rescue', "
            f"the current state is '{state}'"
        )


class RetiredInAvailable(exc.Conflict):
    error_code = "baremetal.invalid-state"

    def __init__(self, node: str, state: str) -> None:
        super().__init__(
            f"Node {node} can not have 'retired' set in provision state 'available', "
            f"the current state is '{state}'"
        )


class NodeIsRetired(exc.Invalid):
    error_code = "baremetal.node-retired"

    def __init__(self, op: str, node: str) -> None:
        super().__init__(f"The {op} operation can't be performed on node {node} because it is retired.")


def trait_error(trait: Any) -> str | None:
    """Why *trait* is not a valid trait name (Ironic's TRAITS_SCHEMA), or ``None``."""
    if not isinstance(trait, str):
        return f"{exc.cut(repr(trait))} is not of type 'string'"
    if not trait:
        return "'' should be non-empty"
    if len(trait) > TRAIT_MAX_LENGTH:
        return f"{exc.cut(repr(trait))} is too long"
    if CUSTOM_TRAIT_RE.match(trait) or trait in STANDARD_TRAITS:
        return None
    return (
        f"{exc.cut(repr(trait))} is not valid under any of the given schemas. Possible root cause: "
        f"{exc.cut(repr(trait))} does not match '^CUSTOM_[A-Z0-9_]+$'"
    )


# -- hooks the facade calls on every node write --------------------------------------------------


def node_change_rules(current: Mapping[str, Any], out: dict[str, Any]) -> dict[str, Any]:
    """Ironic's retirement and instance-name rules on a node change set (*out*, changed
    fields only); returns *out*, completed."""
    uuid = str(current.get("uuid"))
    protected = bool(out.get("protected", current.get("protected")))
    if "protected" in out:
        if not out["protected"]:
            out["protected_reason"] = None
        elif current.get("provision_state") not in PROTECTED_STATES:
            raise ProtectedInState(uuid, str(current.get("provision_state")))
    if out.get("protected_reason") and not protected:
        raise exc.InvalidParameterValue("The protected_reason field can only be set when protected is True")
    if "protected_reason" in out and out["protected_reason"] == current.get("protected_reason"):
        del out["protected_reason"]
    retired = bool(out.get("retired", current.get("retired")))
    if "retired" in out:
        if not out["retired"]:
            out["retired_reason"] = None
        elif current.get("provision_state") == "available":
            raise RetiredInAvailable(uuid, str(current.get("provision_state")))
    if out.get("retired_reason") and not retired:
        raise exc.InvalidParameterValue("The retired_reason field can only be set when retired is True")
    if "retired_reason" in out and out["retired_reason"] == current.get("retired_reason"):
        del out["retired_reason"]
    if "instance_info" in out and not out.get("instance_name", current.get("instance_name")):
        display = (out["instance_info"] or {}).get("display_name")
        if isinstance(display, str) and 0 < len(display) <= TRAIT_MAX_LENGTH and "\x00" not in display:
            out["instance_name"] = display
    return out


def check_provision(current: Mapping[str, Any], target: str) -> None:
    """A retired node is not provided (Ironic's conductor: NodeIsRetired, 400)."""
    if target == "provide" and current.get("provision_state") == "manageable" and current.get("retired"):
        raise NodeIsRetired("providing", str(current.get("uuid")))


# -- the feature facade ----------------------------------------------------------------------------


class NodeFeatures:
    """Traits, VIFs, virtual media and firmware of nodes (see the module docstring)."""

    def __init__(self, service: Any) -> None:
        self.service = service
        self.db = service.db

    def _node(self, ident: str, project_id: str | None) -> dict[str, Any]:
        return self.db.get("node", ident, project_id=project_id)

    def _unreserved(self, ident: str, project_id: str | None, if_match: IfMatchArg) -> dict[str, Any]:
        """The node, 409 when reserved and 412 when *if_match* is stale: a write of no field,
        so an action that changes nothing stored still honours (and marks) its If-Match."""
        return self.db.update(
            "node", ident, self.service.refuse_locked, if_match=if_match, project_id=project_id,
            match=_UNRESERVED, on_conflict=self.service.refuse_locked,
        )  # fmt: skip

    @staticmethod
    def _owner_only(current: Mapping[str, Any], project_id: str | None, rule: str) -> None:
        if project_id is not None and current.get("owner") != project_id:
            raise exc.PolicyForbidden(rule)

    def _write_traits(
        self,
        ident: str,
        compute: Any,
        *,
        project_id: str | None,
        if_match: IfMatchArg,
        rule: str,
    ) -> dict[str, Any]:
        if project_id is not None:  # 403 before 412, as for every other node write
            self._owner_only(self._node(ident, project_id), project_id, rule)

        def mutate(current: dict[str, Any]) -> dict[str, Any]:
            self._owner_only(current, project_id, rule)
            self.service.refuse_locked(current)
            old = list(current.get("traits") or [])
            new = sorted(set(compute(current, old)))
            if len(new) > MAX_TRAITS_PER_NODE:
                raise TooManyTraits(current["uuid"], len(new))
            return {} if new == old else {"traits": new}

        doc = self.db.update(
            "node", ident, mutate, if_match=if_match, project_id=project_id,
            match=_UNRESERVED, on_conflict=self.service.refuse_locked,
        )  # fmt: skip
        return self.service.node_out(doc)

    # -- traits --------------------------------------------------------------------------

    def list_traits(self, ident: str, *, project_id: str | None = None) -> list[str]:
        return list(self._node(ident, project_id).get("traits") or [])

    def add_trait(
        self, ident: str, trait: str, *, project_id: str | None = None, if_match: IfMatchArg = None
    ) -> dict[str, Any]:
        self._valid(trait, "trait")
        return self._write_traits(
            ident, lambda _cur, old: [*old, trait], project_id=project_id, if_match=if_match,
            rule="baremetal:node:traits:set",
        )  # fmt: skip

    def set_traits(
        self, ident: str, traits: list[str], *, project_id: str | None = None, if_match: IfMatchArg = None
    ) -> dict[str, Any]:
        for trait in traits:
            self._valid(trait, "body")
        return self._write_traits(
            ident, lambda _cur, _old: traits, project_id=project_id, if_match=if_match,
            rule="baremetal:node:traits:set",
        )  # fmt: skip

    def remove_trait(
        self, ident: str, trait: str | None, *, project_id: str | None = None, if_match: IfMatchArg = None
    ) -> dict[str, Any]:
        """Remove *trait* (404 if the node lacks it), or every trait when ``None``."""

        def compute(current: Mapping[str, Any], old: list[str]) -> list[str]:
            if trait is None:
                return []
            if trait not in old:
                raise NodeTraitNotFound(str(current["uuid"]), trait)
            return [t for t in old if t != trait]

        return self._write_traits(
            ident, compute, project_id=project_id, if_match=if_match, rule="baremetal:node:traits:delete"
        )

    @staticmethod
    def _valid(trait: Any, what: str) -> None:
        error = trait_error(trait)
        if error is not None:
            raise exc.InvalidParameterValue(f"Schema error for {what}: {error}")

    # -- VIFs (the noop network interface) -------------------------------------------------

    def list_vifs(self, ident: str, *, project_id: str | None = None) -> list[dict[str, str]]:
        node = self._node(ident, project_id)
        return self._network(node).vif_list(node)

    def attach_vif(self, ident: str, vif: Mapping[str, Any], *, project_id: str | None = None) -> None:
        node = self._node(ident, project_id)
        self.service.refuse_locked(node)
        self._network(node).vif_attach(node, dict(vif))

    def detach_vif(
        self, ident: str, vif_id: str, *, project_id: str | None = None, if_match: IfMatchArg = None
    ) -> None:
        node = self._unreserved(ident, project_id, if_match)
        self._network(node).vif_detach(node, vif_id)

    @staticmethod
    def _network(node: Mapping[str, Any]) -> NoopNetwork:
        name = node.get("network_interface") or "noop"
        if name != "noop":  # pragma: no cover - the only network interface enabled
            raise exc.InvalidParameterValue(f"Network interface {name} does not support VIFs")
        return NoopNetwork()

    # -- virtual media --------------------------------------------------------------------

    def attach_vmedia(
        self,
        ident: str,
        device_type: str,
        image_url: str,
        image_download_source: str = "local",
        *,
        project_id: str | None = None,
    ) -> None:
        scheme = urlparse(image_url).scheme
        if scheme not in VMEDIA_URL_SCHEMES:
            raise exc.Invalid(f"Unsupported or missing URL scheme: {exc.cut(scheme)}")
        node = self._node(ident, project_id)
        self.service.refuse_locked(node)

    def detach_vmedia(
        self,
        ident: str,
        device_types: list[str] | None = None,
        *,
        project_id: str | None = None,
        if_match: IfMatchArg = None,
    ) -> None:
        invalid = [d for d in device_types or () if d not in VMEDIA_DEVICES]
        if invalid:
            valid = ", ".join(VMEDIA_DEVICES)
            raise exc.Invalid(f"Invalid device type(s) {exc.cut(', '.join(invalid))} (valid are {valid})")
        self._unreserved(ident, project_id, if_match)

    # -- firmware components -----------------------------------------------------------------

    def list_firmware(self, ident: str, *, project_id: str | None = None) -> list[dict[str, Any]]:
        self._node(ident, project_id)
        return []


class NoopNetwork:
    """Ironic's ``noop`` network interface: VIF calls succeed and nothing is recorded."""

    name = "noop"

    def vif_list(self, node: Mapping[str, Any]) -> list[dict[str, str]]:
        return []

    def vif_attach(self, node: Mapping[str, Any], vif: dict[str, Any]) -> None:
        return None

    def vif_detach(self, node: Mapping[str, Any], vif_id: str) -> None:
        return None
