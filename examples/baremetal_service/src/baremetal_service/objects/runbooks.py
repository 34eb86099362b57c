"""Runbooks (``/v1/runbooks``, Ironic 1.92; traits and description 1.112).

A runbook is a named, ordered list of steps (``order`` instead of a deploy step's
``priority``).  Ironic's default policy for a project-scoped caller (scope ``public``):

* it sees its own runbooks and the public ones (others are "not found");
* a runbook it creates is owned by its project; another ``owner`` or ``public: true``
  on create is 400;
* it may change or delete only the runbooks it owns (a public one it does not own
  is 403); changing ``owner`` or ``public`` is 403 (system-only rules
  ``baremetal:runbook:update:owner`` / ``...:public``).

Ironic's rule that a public runbook has no owner holds for everybody: setting
``public`` clears the owner, and an owner cannot be set on a runbook that stays
public (400).

The CRUD is the generic one, from the declaration (:data:`RUNBOOKS`);
:class:`RunbookService` holds what is beyond CRUD: changing a runbook's traits
(``/v1/runbooks/{id}/traits``, 1.112) atomically.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Final

from baremetal_service import exceptions as exc
from baremetal_service import versions
from baremetal_service.db.api import Database, IfMatchArg, public
from baremetal_service.objects.deploy_templates import normalise_steps
from baremetal_service.objects.resource import Resource
from baremetal_service.schemas import RUNBOOK_CREATE_112
from baremetal_service.values import check_name
from baremetal_service.versions import ETAG_VERSION, FIRST, Fields

if TYPE_CHECKING:
    from baremetal_service.objects.crud import Crud

__all__ = ['RunbookService']

_PUBLIC_OWNER: Final = "There cannot be an owner for a public runbook"


def normalise(values: dict[str, Any], creating: bool) -> dict[str, Any]:
    if "name" in values:
        check_name("runbook", values["name"])  # not "detail": /v1/runbooks/detail lists them
    if "steps" in values:
        values["steps"] = normalise_steps(values["steps"], "order", "runbook")
    return values


def check_create(crud: Crud, row: dict[str, Any], project_id: str | None) -> None:
    if row.get("public") and row.get("owner"):
        raise exc.InvalidParameterValue(_PUBLIC_OWNER)
    if project_id is not None:
        if row.get("owner") not in (None, project_id):
            raise exc.InvalidParameterValue(
                "Cannot create a runbook as a project scoped admin with an owner other than your own project."
            )
        if row.get("public"):
            raise exc.InvalidParameterValue("Cannot create a public runbook as a project scoped admin.")
        row["owner"] = project_id
    row.setdefault("traits", [])


def check_update(
    crud: Crud, current: dict[str, Any], changes: dict[str, Any], project_id: str | None
) -> None:
    for key in ("owner", "public"):
        if project_id is not None and key in changes:
            raise exc.PolicyForbidden(f"baremetal:runbook:update:{key}")
    if changes.get("public") and not current.get("public"):
        changes["owner"] = None  # a runbook made public loses its owner
    merged = {**current, **changes}
    if merged.get("public") and merged.get("owner"):
        raise exc.InvalidParameterValue(_PUBLIC_OWNER)


FIELDS: Final = Fields({
    "uuid": FIRST, "created_at": FIRST, "updated_at": FIRST, "name": FIRST, "extra": FIRST,
    "public": FIRST, "owner": FIRST, "disable_ramdisk": FIRST, "description": versions.RUNBOOK_TRAITS,
    "links": FIRST, "steps": FIRST, "traits": versions.RUNBOOK_TRAITS, "etag": ETAG_VERSION,
})  # fmt: skip

RUNBOOKS: Final = Resource(
    kind="runbook",
    fields=FIELDS,
    list_fields=("uuid", "name"),
    create_schema=RUNBOOK_CREATE_112,  # what a patched runbook must satisfy (Ironic's choice)
    patchable=("disable_ramdisk", "extra", "name", "owner", "public", "steps", "description"),
    sort_keys=("uuid", "name", "created_at", "updated_at"),
    since=versions.RUNBOOKS,
    refuse_early_writes=True,
    ignored_args=("project",),
    defaults={"steps": [], "public": False},
    updatable=frozenset({"name", "description", "steps", "extra", "public", "owner", "disable_ramdisk"}),
    scope="public",
    policy="baremetal:runbook",
    null_defaults={"extra": {}, "public": False, "disable_ramdisk": False},
    normalise=normalise,
    check_create=check_create,
    check_update=check_update,
    routes=False,  # handlers/runbooks.py: create picks the schema of the version; traits
)
DECLARED: Final = (RUNBOOKS,)


class RunbookService:
    def __init__(self, service: Any) -> None:
        self.db: Database = service.db
        self._service = service

    def set_runbook_traits(
        self,
        ident: str,
        change: Callable[[list[str]], list[str]],
        *,
        project_id: str | None = None,
        if_match: IfMatchArg = None,
    ) -> dict[str, Any]:
        """Apply *change* (current traits -> new traits) atomically."""
        crud = self._service.crud["runbook"]

        def mutate(current: dict[str, Any]) -> dict[str, Any]:
            crud.authorize(current, project_id, "update")
            traits = change(list(current.get("traits") or []))
            return {} if traits == current.get("traits") else {"traits": traits}

        crud.get(ident, project_id=project_id)  # not found for a runbook the caller cannot see
        return public(self.db.update("runbook", ident, mutate, if_match=if_match))
