"""Allocations (``/v1/allocations``, Ironic 1.52; PATCH 1.57; backfill 1.58; owner 1.60).

Scoped by their own ``owner`` (a project sees its own).  The allocation process
(matching, backfill, freeing the node on delete) is
:mod:`baremetal_service.services_allocations`' (``service.allocations``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final

from ..api import versions
from ..api.collections_a_schemas import ALLOCATION_CREATE
from . import Resource

if TYPE_CHECKING:
    from ..crud import Crud


def check_create(crud: Crud, row: dict[str, Any], project_id: str | None) -> None:
    crud.service.allocations.prepare_create(row, project_id)


def after_create(crud: Crud, doc: dict[str, Any], values: Any, project_id: str | None) -> dict[str, Any]:
    return crud.service.allocations.start(doc, values, project_id)  # type: ignore[no-any-return]


def check_delete(crud: Crud, current: dict[str, Any], project_id: str | None) -> None:
    crud.service.allocations.check_delete(current)


def after_delete(crud: Crud, doc: dict[str, Any]) -> None:
    crud.service.allocations.deleted(doc)


FIELDS: Final = (
    "uuid", "created_at", "updated_at", "candidate_nodes", "extra", "last_error", "name", "owner",
    "resource_class", "state", "traits", "links", "node_uuid", "etag",
)  # fmt: skip

ALLOCATIONS: Final = Resource(
    kind="allocation",
    collection="allocations",
    field_versions=versions.ALLOCATION_FIELD_VERSIONS,
    fields=FIELDS,
    list_fields=FIELDS,
    create_schema=ALLOCATION_CREATE,
    patchable=("name", "extra"),
    sort_keys=("uuid", "name", "created_at", "updated_at", "state", "resource_class"),
    since=versions.ALLOCATIONS,
    filters=(
        ("node", versions.ALLOCATIONS),
        ("resource_class", versions.ALLOCATIONS),
        ("state", versions.ALLOCATIONS),
        ("owner", versions.ALLOCATION_OWNER),
    ),
    defaults={"candidate_nodes": []},
    write_once=frozenset({"resource_class", "candidate_nodes", "traits", "owner", "node"}),
    scope="owner",
    policy="baremetal:allocation",
    relations={"node_uuid": "node"},
    list_filters={
        "node": "node_uuid",
        "resource_class": "resource_class",
        "state": "state",
        "owner": "owner",
    },
    filter_not_found=400,
    null_defaults={"extra": {}},
    check_create=check_create,
    after_create=after_create,
    check_delete=check_delete,
    after_delete=after_delete,
    routes=False,  # api/allocations.py: version rules of create and PATCH, the node's allocation
)
DECLARED: Final = (ALLOCATIONS,)
