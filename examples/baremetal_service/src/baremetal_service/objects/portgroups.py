"""Portgroups (``/v1/portgroups`` from 1.23; ``/v1/nodes/{node}/portgroups`` from 1.24)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final

from apimw import Version
from baremetal_service import exceptions as exc
from baremetal_service import schemas, versions
from baremetal_service.objects.resource import Resource
from baremetal_service.values import check_name, mac
from baremetal_service.versions import ETAG_VERSION, FIRST, Fields

if TYPE_CHECKING:
    from baremetal_service.objects.crud import Crud

UPDATABLE: Final = frozenset({
    "address", "name", "node_uuid", "extra", "mode", "properties", "standalone_ports_supported",
    "physical_network", "category", "dynamic_portgroup",
})  # fmt: skip


def normalise(values: dict[str, Any], creating: bool) -> dict[str, Any]:
    if values.get("address") is not None:
        values["address"] = mac(values["address"])
    check_name("portgroup", values.get("name"))
    return values


def check_create(crud: Crud, row: dict[str, Any], project_id: str | None) -> None:
    if "node_uuid" not in row:
        raise exc.InvalidParameterValue("A portgroup needs a node_uuid.")


def check_update(
    crud: Crud, current: dict[str, Any], changes: dict[str, Any], project_id: str | None
) -> None:
    if "node_uuid" in changes and crud.db.count("port", portgroup_id=current["id"]):
        raise exc.PortgroupNotEmpty(current["uuid"])


def check_delete(crud: Crud, current: dict[str, Any], project_id: str | None) -> None:
    if crud.db.count("port", portgroup_id=current["id"]):
        raise exc.PortgroupNotEmpty(current["uuid"])


PORTGROUP_FIELDS: Final = Fields({
    "uuid": FIRST, "created_at": FIRST, "updated_at": FIRST, "address": FIRST, "extra": FIRST,
    "internal_info": FIRST, "mode": Version(1, 26), "name": FIRST, "node_uuid": FIRST,
    "properties": Version(1, 26), "standalone_ports_supported": FIRST,
    "physical_network": Version(1, 102), "category": Version(1, 103),
    "dynamic_portgroup": Version(1, 111), "links": FIRST, "ports": FIRST, "etag": ETAG_VERSION,
})  # fmt: skip

PORTGROUPS: Final = Resource(
    kind="portgroup",
    fields=PORTGROUP_FIELDS,
    list_fields=("uuid", "address", "name"),
    create_schema=schemas.PORTGROUP_CREATE,
    patchable=(
        "address",
        "name",
        "node_uuid",
        "extra",
        "standalone_ports_supported",
        "mode",
        "properties",
        "physical_network",
        "category",
    ),  # fmt: skip
    sort_keys=("uuid", "address", "name", "created_at", "updated_at"),
    since=versions.PORTGROUPS,
    sublinks=("ports",),
    filters=(("node", Version(1, 23)), ("address", Version(1, 23))),
    filter_kwargs={"node_uuid": "node"},
    ignored_args=("shard", "conductor_groups"),
    updatable=UPDATABLE,
    scope="node",
    policy="baremetal:portgroup",
    relations={"node_uuid": "node"},
    list_filters={"node": "node_uuid", "address": "address"},
    null_defaults={"extra": {}, "properties": {}},
    normalise=normalise,
    check_create=check_create,
    check_update=check_update,
    check_delete=check_delete,
)
DECLARED: Final = (PORTGROUPS,)
