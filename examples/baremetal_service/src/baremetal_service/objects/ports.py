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


#: Most members of one port group read to learn its physical network (they all share one).
_PHYSNET_SAMPLE: Final = 100


def _portgroup_physnet(crud: Crud, port: dict[str, Any], project_id: str | None) -> None:
    """A port in a port group is on the group's physical network: the group's own
    ``physical_network`` and its other ports' (Ironic's 409 otherwise; ``None`` is a network
    too, so a port without one cannot join a group whose ports have one)."""
    pg_ident = port.get("portgroup_uuid")
    if pg_ident is None:
        return
    portgroup = crud.db.get("portgroup", str(pg_ident), project_id=project_id)
    members = crud.db.list(
        "port", equals={"portgroup_id": portgroup["id"]}, fields=("physical_network",), limit=_PHYSNET_SAMPLE
    )
    physnets = {m.get("physical_network") for m in members if m["uuid"] != port.get("uuid")}
    if portgroup.get("physical_network") is not None:
        physnets.add(portgroup["physical_network"])
    own = port.get("physical_network")
    if physnets and own not in physnets:
        theirs = sorted(map(str, physnets))[0]  # one, unless the group is inconsistent already
        raise exc.Conflict(
            f"Port with physical network {own} cannot become a member of port group "
            f"{portgroup['uuid']} which has ports in physical network {theirs}."
        )


def check_create(crud: Crud, row: dict[str, Any], project_id: str | None) -> None:
    if "address" not in row or "node_uuid" not in row:
        raise exc.InvalidParameterValue("A port needs an address and a node_uuid.")
    _portgroup_on_node(crud, row, project_id)
    _portgroup_physnet(crud, row, project_id)


def check_update(
    crud: Crud, current: dict[str, Any], changes: dict[str, Any], project_id: str | None
) -> None:
    if "portgroup_uuid" in changes or "node_uuid" in changes:
        _portgroup_on_node(crud, {**current, **changes}, project_id)
    if "portgroup_uuid" in changes or "physical_network" in changes:
        _portgroup_physnet(crud, {**current, **changes}, project_id)


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
    ident_name="port_ident",
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
