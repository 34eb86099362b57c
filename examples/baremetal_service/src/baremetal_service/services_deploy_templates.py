"""Deploy templates (``/v1/deploy_templates``, Ironic 1.55): named sets of deploy steps.

Global (no owner; Ironic's policy is system-scoped).  CRUD through the data API's
one write path (etag, events, atomic If-Match).  A template's ``name`` is a trait
(``CUSTOM_...``) and its steps are unique per (interface, step): the API layer checks
the JSON schema, :func:`normalise_steps` the rest.
"""

from __future__ import annotations

import copy
import uuid as uuidlib
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Final

from . import exceptions as exc
from .db.api import Database, IfMatchArg, is_uuid_like, public

__all__ = ["DeployTemplateService", "normalise_steps"]

UPDATABLE: Final = frozenset({"name", "description", "steps", "extra"})


def normalise_steps(steps: Iterable[Mapping[str, Any]], order_key: str, what: str) -> list[dict[str, Any]]:
    """Steps as Ironic stores them: ``priority``/``order`` as int, ``args`` an object;
    400 for a repeated (interface, step)."""
    out = []
    for step in steps:
        item = {"interface": step["interface"], "step": step["step"], "args": dict(step.get("args") or {})}
        item[order_key] = int(step[order_key])
        out.append(item)
    counts = Counter((s["interface"], s["step"]) for s in out)
    duplicates = sorted(f"interface: {i}, step: {s}" for (i, s), n in counts.items() if n > 1)
    if duplicates:
        raise exc.InvalidParameterValue(
            f"Duplicate {what} steps. A {what} cannot have multiple {what} steps with the same "
            f"interface and step. Duplicates: {'; '.join(duplicates)}"
        )
    return out


def _check_uuid(value: Any) -> str:
    if not isinstance(value, str) or not is_uuid_like(value):
        raise exc.InvalidParameterValue(f"Expected a UUID but received {value}.", field="uuid")
    return value.lower()


class DeployTemplateService:
    def __init__(self, db: Database) -> None:
        self.db = db

    def _values(self, values: Mapping[str, Any]) -> dict[str, Any]:
        out = dict(values)
        if "steps" in out:
            out["steps"] = normalise_steps(out["steps"], "priority", "deploy")
        if "extra" in out and out["extra"] is None:
            out["extra"] = {}
        return out

    def create_deploy_template(self, values: Mapping[str, Any]) -> dict[str, Any]:
        row = self._values(values)
        row["uuid"] = _check_uuid(row["uuid"]) if row.get("uuid") else str(uuidlib.uuid4())
        return public(self.db.insert("deploy_template", row))

    def get_deploy_template(self, ident: str) -> dict[str, Any]:
        return self.db.get("deploy_template", ident, internal=False)

    def list_deploy_templates(
        self,
        *,
        limit: int | None = None,
        marker: str | None = None,
        sort_key: str = "id",
        sort_dir: str = "asc",
        fields: Iterable[str] | None = None,
    ) -> list[dict[str, Any]]:
        return self.db.list(
            "deploy_template", limit=limit, marker=marker, sort_key=sort_key, sort_dir=sort_dir,
            fields=fields, internal=False,
        )  # fmt: skip

    def update_deploy_template(
        self,
        ident: str,
        changes: Mapping[str, Any] | Callable[[dict[str, Any]], Mapping[str, Any]],
        *,
        if_match: IfMatchArg = None,
    ) -> dict[str, Any]:
        def mutate(current: dict[str, Any]) -> dict[str, Any]:
            wanted = changes(copy.deepcopy(public(current))) if callable(changes) else changes
            unknown = sorted(set(wanted) - UPDATABLE)
            if unknown:
                raise exc.InvalidParameterValue(f"Unknown or read-only deploy template field(s): {unknown}")
            out = self._values(wanted)
            return {k: v for k, v in out.items() if current.get(k) != v}

        return public(self.db.update("deploy_template", ident, mutate, if_match=if_match))

    def delete_deploy_template(self, ident: str, *, if_match: IfMatchArg = None) -> None:
        self.db.delete("deploy_template", ident, if_match=if_match)
