"""Runbooks (``/v1/runbooks``, Ironic 1.92; traits and description 1.112).

A runbook is a named, ordered list of steps (``order`` instead of a deploy step's
``priority``).  Ironic's default policy for a project-scoped caller (``project_id``
not ``None``):

* it sees its own runbooks and the public ones (others are "not found");
* a runbook it creates is owned by its project; another ``owner`` or ``public: true``
  on create is 400;
* it may change or delete only the runbooks it owns (a public one it does not own
  is 403); changing ``owner`` or ``public`` is 403 (system-only rules
  ``baremetal:runbook:update:owner`` / ``...:public``).

Unscoped callers (``None``: admin / noauth) may do everything.  Ironic's rule that a
public runbook has no owner holds for everybody: setting ``public`` clears the owner,
and an owner cannot be set on a runbook that stays public (400).
"""

from __future__ import annotations

import copy
import uuid as uuidlib
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Final

import sqlalchemy as sa

from . import exceptions as exc
from .db.api import RUNBOOKS, Database, IfMatchArg, is_uuid_like, public
from .services_deploy_templates import normalise_steps

__all__ = ["RunbookService"]

UPDATABLE: Final = frozenset({"name", "description", "steps", "extra", "public", "owner", "disable_ramdisk"})


class RunbookService:
    def __init__(self, db: Database) -> None:
        self.db = db

    # -- scoping ------------------------------------------------------------------------

    def _visible(self, ident: str, project_id: str | None) -> dict[str, Any]:
        doc = self.db.get("runbook", ident)
        if project_id is not None and doc.get("owner") != project_id and not doc.get("public"):
            raise exc.RunbookNotFound(ident)
        return doc

    @staticmethod
    def _owned(current: Mapping[str, Any], project_id: str | None, rule: str) -> None:
        if project_id is not None and current.get("owner") != project_id:
            if current.get("public"):
                raise exc.PolicyForbidden(rule)
            raise exc.RunbookNotFound(str(current.get("uuid")))

    # -- values -------------------------------------------------------------------------

    @staticmethod
    def _values(values: Mapping[str, Any]) -> dict[str, Any]:
        out = dict(values)
        if "steps" in out:
            out["steps"] = normalise_steps(out["steps"], "order", "runbook")
        if "extra" in out and out["extra"] is None:
            out["extra"] = {}
        for key in ("public", "disable_ramdisk"):
            if key in out and out[key] is None:
                out[key] = False
        if out.get("public") and out.get("owner"):
            raise exc.InvalidParameterValue("There cannot be an owner for a public runbook")
        return out

    # -- CRUD ---------------------------------------------------------------------------

    def create_runbook(self, values: Mapping[str, Any], *, project_id: str | None = None) -> dict[str, Any]:
        row = self._values(values)
        if project_id is not None:
            if row.get("owner") not in (None, project_id):
                raise exc.InvalidParameterValue(
                    "Cannot create a runbook as a project scoped admin with an owner other than "
                    "your own project."
                )
            if row.get("public"):
                raise exc.InvalidParameterValue("Cannot create a public runbook as a project scoped admin.")
            row["owner"] = project_id
        uuid = row.get("uuid")
        if uuid:
            if not isinstance(uuid, str) or not is_uuid_like(uuid):
                raise exc.InvalidParameterValue(f"Expected a UUID but received {uuid}.", field="uuid")
            row["uuid"] = uuid.lower()
        else:
            row["uuid"] = str(uuidlib.uuid4())
        row.setdefault("traits", [])
        return public(self.db.insert("runbook", row))

    def get_runbook(self, ident: str, *, project_id: str | None = None) -> dict[str, Any]:
        return public(self._visible(ident, project_id))

    def list_runbooks(
        self,
        *,
        project_id: str | None = None,
        limit: int | None = None,
        marker: str | None = None,
        sort_key: str = "id",
        sort_dir: str = "asc",
        fields: Iterable[str] | None = None,
    ) -> list[dict[str, Any]]:
        where: list[sa.ColumnElement[bool]] = []
        if project_id is not None:
            where.append(sa.or_(RUNBOOKS.c.owner == project_id, RUNBOOKS.c.public.is_(True)))
        return self.db.list(
            "runbook", where=where, limit=limit, marker=marker, sort_key=sort_key, sort_dir=sort_dir,
            fields=fields, internal=False,
        )  # fmt: skip

    def update_runbook(
        self,
        ident: str,
        changes: Mapping[str, Any] | Callable[[dict[str, Any]], Mapping[str, Any]],
        *,
        project_id: str | None = None,
        if_match: IfMatchArg = None,
    ) -> dict[str, Any]:
        def mutate(current: dict[str, Any]) -> dict[str, Any]:
            self._owned(current, project_id, "baremetal:runbook:update")
            wanted = dict(changes(copy.deepcopy(public(current))) if callable(changes) else changes)
            unknown = sorted(set(wanted) - UPDATABLE - {"traits"})
            if unknown:
                raise exc.InvalidParameterValue(f"Unknown or read-only runbook field(s): {unknown}")
            for key in ("owner", "public"):
                if project_id is not None and key in wanted and wanted[key] != current.get(key):
                    raise exc.PolicyForbidden(f"baremetal:runbook:update:{key}")
            if wanted.get("public") and not current.get("public"):
                wanted["owner"] = None  # a runbook made public loses its owner
            merged = {**current, **wanted}
            if merged.get("public") and merged.get("owner"):
                raise exc.InvalidParameterValue("There cannot be an owner for a public runbook")
            out = self._values(wanted)
            return {k: v for k, v in out.items() if current.get(k) != v}

        self._visible(ident, project_id)
        return public(self.db.update("runbook", ident, mutate, if_match=if_match))

    def delete_runbook(
        self, ident: str, *, project_id: str | None = None, if_match: IfMatchArg = None
    ) -> None:
        self._owned(self._visible(ident, project_id), project_id, "baremetal:runbook:delete")
        self.db.delete(
            "runbook", ident, if_match=if_match,
            check=lambda cur: self._owned(cur, project_id, "baremetal:runbook:delete"),
        )  # fmt: skip

    # -- traits (1.112) -------------------------------------------------------------------

    def set_runbook_traits(
        self,
        ident: str,
        change: Callable[[list[str]], list[str]],
        *,
        project_id: str | None = None,
        if_match: IfMatchArg = None,
    ) -> dict[str, Any]:
        """Apply *change* (current traits -> new traits) atomically."""

        def mutate(current: dict[str, Any]) -> dict[str, Any]:
            self._owned(current, project_id, "baremetal:runbook:update")
            traits = change(list(current.get("traits") or []))
            return {} if traits == current.get("traits") else {"traits": traits}

        self._visible(ident, project_id)
        return public(self.db.update("runbook", ident, mutate, if_match=if_match))
