"""Runbooks' traits (``/v1/runbooks/{id}/traits``, Ironic 1.112).

The runbook CRUD and its tenancy rules are declared in
:mod:`baremetal_service.resources.runbooks` (the generic CRUD serves them); this
module holds what is beyond CRUD: changing a runbook's traits atomically.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .db.api import Database, IfMatchArg, public

__all__ = ["RunbookService"]


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
