"""Chassis (``/v1/chassis``): global, a description and ``extra``; ``/v1/chassis/{id}/nodes``."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final

from baremetal_service import exceptions as exc
from baremetal_service import schemas
from baremetal_service.objects.resource import Resource
from baremetal_service.versions import ETAG_VERSION, FIRST, Fields

if TYPE_CHECKING:
    from baremetal_service.objects.crud import Crud


def check_delete(crud: Crud, current: dict[str, Any], project_id: str | None) -> None:
    if crud.db.count("node", chassis_id=current["id"]):
        raise exc.ChassisNotEmpty(current["uuid"])


CHASSIS_FIELDS: Final = Fields({
    "uuid": FIRST, "created_at": FIRST, "updated_at": FIRST, "description": FIRST, "extra": FIRST,
    "links": FIRST, "nodes": FIRST, "etag": ETAG_VERSION,
})  # fmt: skip

CHASSIS: Final = Resource(
    kind="chassis",
    collection="chassis",
    fields=CHASSIS_FIELDS,
    list_fields=("uuid", "description"),
    create_schema=schemas.CHASSIS_CREATE,
    patchable=("description", "extra"),
    sort_keys=("uuid", "description", "created_at", "updated_at"),
    sublinks=("nodes",),
    null_defaults={"extra": {}},
    check_delete=check_delete,
)
DECLARED: Final = (CHASSIS,)
