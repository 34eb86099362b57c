"""Ports (``/v1/ports``; also under ``/v1/nodes/{node}/ports`` and ``/v1/portgroups/{pg}/ports``)."""

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

#: what a create or an update may set (the API's patchable fields and a few more)
UPDATABLE: Final = frozenset({
    "address", "node_uuid", "portgroup_uuid", "extra", "local_link_connection", "pxe_enabled",
    "physical_network", "is_smartnic", "name", "description", "vendor", "category",
    "available_for_dynamic_portgroup",
})  # fmt: skip


def normalise(values: dict[str, Any], creating: bool) -> dict[str, Any]:
    if "address" in values:
        values["address"] = mac(values["address"])
    check_name("port", values.get("name"))
    return values


def _portgroup_on_node(crud: Crud, port: dict[str, Any], project_id: str | None) -> None:
    """A port's portgroup must be on the port's node (the missing one is a 400)."""
    pg_ident = port.get("portgroup_uuid")
    if pg_ident is None:
        return
    try:
        portgroup = crud.db.get("portgroup", str(pg_ident), project_id=project_id)
        node = crud.db.get("node", str(port["node_uuid"]), project_id=project_id)
    except (exc.NodeNotFound, exc.PortgroupNotFound) as error:
        error.status = 400
        raise
    if portgroup["node_id"] != node["id"]:
        raise exc.InvalidParameterValue("Port can not be added to a portgroup on a different node.")


def check_create(crud: Crud, row: dict[str, Any], project_id: str | None) -> None:
    if "address" not in row or "node_uuid" not in row:
        raise exc.InvalidParameterValue("A port needs an address and a node_uuid.")
    _portgroup_on_node(crud, row, project_id)


def check_update(
    crud: Crud, current: dict[str, Any], changes: dict[str, Any], project_id: str | None
) -> None:
    if "portgroup_uuid" in changes or "node_uuid" in changes:
        _portgroup_on_node(crud, {**current, **changes}, project_id)


PORT_FIELDS: Final = Fields({
    "uuid": FIRST, "created_at": FIRST, "updated_at": FIRST, "address": FIRST, "extra": FIRST,
    "internal_info": Version(1, 18), "is_smartnic": Version(1, 53),
    "local_link_connection": Version(1, 19), "physical_network": Version(1, 34),
    "pxe_enabled": Version(1, 19), "node_uuid": FIRST, "name": Version(1, 88),
    "description": Version(1, 97), "vendor": Version(1, 100), "category": Version(1, 101),
    "available_for_dynamic_portgroup": Version(1, 111), "links": FIRST,
    "portgroup_uuid": Version(1, 24), "etag": ETAG_VERSION,
})  # fmt: skip

PORTS: Final = Resource(
    kind="port",
    fields=PORT_FIELDS,
    list_fields=("uuid", "address"),
    create_schema=schemas.PORT_CREATE,
    patchable=(
        "address",
        "node_uuid",
        "portgroup_uuid",
        "extra",
        "local_link_connection",
        "pxe_enabled",
        "physical_network",
        "is_smartnic",
        "name",
        "description",
    ),  # fmt: skip
    sort_keys=("uuid", "address", "created_at", "updated_at", "name", "pxe_enabled"),
    filters=(
        ("node", Version(1, 1)),
        ("node_uuid", Version(1, 1)),
        ("address", Version(1, 1)),
        ("portgroup", versions.PORTGROUPS_SUBCONTROLLERS),
    ),
    # openstacksdk's ports(node_id=...) sends ?node_uuid=; the CRUD filters by "node".
    filter_kwargs={"node_uuid": "node"},
    ignored_args=("shard", "conductor_groups", "description_contains"),
    updatable=UPDATABLE,
    scope="node",
    policy="baremetal:port",
    relations={"node_uuid": "node", "portgroup_uuid": "portgroup"},
    list_filters={"node": "node_uuid", "portgroup": "portgroup_uuid", "address": "address"},
    null_defaults={"extra": {}, "local_link_connection": {}},
    normalise=normalise,
    check_create=check_create,
    check_update=check_update,
)
DECLARED: Final = (PORTS,)
