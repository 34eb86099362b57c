"""Volume connectors and volume targets (Ironic's ``/v1/volume``, microversion 1.32).

Both belong to a node and follow its tenancy, like ports: a project-scoped caller
sees those of the nodes it owns or leases, and creates, changes or deletes them
only on nodes it owns (a lessee gets 403 ``baremetal.forbidden``; a node it
cannot see is not found).  Ironic's state rules, checked atomically with the
write (the UPDATE/DELETE carries the node condition, so a node powered on between
the check and the write makes the write retry and then fail):

* a connector or target changes only while its node is powered off (and, when it
  moves, while the new node is too): else 400 ``baremetal.invalid-node-state``
  ('The requested action "volume connector update" can not be performed on node
  "<uuid>" while it is in state "<power state>".');
* it is deleted while its node is powered off or enroll, manageable or adopt failed;
* creating one has no state rule (Ironic's neither).

A connector is unique per ``(type, connector_id)`` and a target per ``(node,
boot_index)``: 409 with Ironic's text, decided by the database's unique constraints.
Deleting a node deletes its connectors and targets (``ON DELETE CASCADE``).

The CRUD is the generic one (:mod:`baremetal_service.objects.crud`), from the
declarations (:data:`CONNECTORS`, :data:`TARGETS`: scope ``node``, policy
``baremetal:volume``); this module also holds the power rules, the declarations'
hooks, which the write carries as conditions (``node_powered_off``,
``node_deletable``), so they hold atomically.  The HTTP side is
:mod:`baremetal_service.handlers.volume`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final

from baremetal_service import exceptions as exc
from baremetal_service import versions
from baremetal_service.db.api import POWER_OFF, VOLUME_DELETE_STATES
from baremetal_service.objects.resource import Resource
from baremetal_service.schemas import CONNECTOR_CREATE, TARGET_CREATE
from baremetal_service.versions import ETAG_VERSION, FIRST, Fields

if TYPE_CHECKING:
    from baremetal_service.objects.crud import Crud

__all__ = ['check_delete', 'check_update']

#: Provision states in which a volume resource may be deleted whatever the power state
#: (Ironic's ``states.DELETE_ALLOWED_STATES``).
DELETE_STATES: Final = VOLUME_DELETE_STATES


def check_update(
    crud: Crud, current: dict[str, Any], changes: dict[str, Any], project_id: str | None
) -> None:
    """A change needs the node powered off, and so does a move to another node."""
    label = crud.decl.name
    node = crud.service.wait_idle(current["node_uuid"])  # a power action under way ends first
    if node.get("power_state") != POWER_OFF:
        raise exc.NodeStateForbidsAction(f"{label} update", node["uuid"], node.get("power_state"))
    if "node_uuid" in changes:
        new = crud.owned_node(changes["node_uuid"], project_id, "update")
        if new.get("power_state") != POWER_OFF:
            raise exc.NodeStateForbidsAction(f"{label} update", new["uuid"], new.get("power_state"))
        changes["node_uuid"] = new["uuid"]
        if new["uuid"] == current["node_uuid"]:
            del changes["node_uuid"]


def check_delete(crud: Crud, current: dict[str, Any], project_id: str | None) -> None:
    """A delete needs the node powered off, or enroll, manageable or adopt failed."""
    node = crud.service.wait_idle(current["node_uuid"])
    state = node.get("power_state")
    if node["provision_state"] not in DELETE_STATES and state != POWER_OFF:
        raise exc.NodeStateForbidsAction(f"{crud.decl.name} deletion", node["uuid"], state)


def _fields(*own: str) -> Fields:
    """A connector's or target's fields in Ironic's order: its own between the common ones."""
    names = ("uuid", "created_at", "updated_at", *own, "links", "node_uuid")
    return Fields({**dict.fromkeys(names, FIRST), "etag": ETAG_VERSION})


_COMMON: Final[dict[str, Any]] = {
    "since": versions.VOLUME,
    "filters": (("node", versions.VOLUME),),
    "detail_since": versions.VOLUME,
    "ignored_args": ("project",),
    "scope": "node",
    "policy": "baremetal:volume",
    "relations": {"node_uuid": "node"},
    "list_filters": {"node": "node_uuid"},
    "null_defaults": {"extra": {}, "properties": {}},
    "check_update": check_update,
    "check_delete": check_delete,
    "update_conditions": ("node_powered_off",),
    "delete_conditions": ("node_deletable",),
    "routes": False,  # handlers/volume.py: UUID-only paths, the /v1/volume index, node lists
}

CONNECTORS: Final = Resource(
    kind="connector",
    collection="volume/connectors",
    fields=_fields("connector_id", "extra", "type"),
    list_fields=("uuid", "node_uuid", "type", "connector_id"),
    create_schema=CONNECTOR_CREATE,
    patchable=("type", "connector_id", "node_uuid", "extra"),
    sort_keys=("uuid", "type", "connector_id", "created_at", "updated_at"),
    list_key="connectors",
    store="volume_connector",
    label="volume connector",
    **_COMMON,
)
TARGETS: Final = Resource(
    kind="target",
    collection="volume/targets",
    fields=_fields("boot_index", "extra", "properties", "volume_id", "volume_type"),
    list_fields=("uuid", "node_uuid", "volume_type", "boot_index", "volume_id"),
    create_schema=TARGET_CREATE,
    patchable=("volume_type", "properties", "boot_index", "volume_id", "node_uuid", "extra"),
    sort_keys=("uuid", "volume_type", "boot_index", "volume_id", "created_at", "updated_at"),
    list_key="targets",
    store="volume_target",
    label="volume target",
    **_COMMON,
)
DECLARED: Final = (CONNECTORS, TARGETS)
