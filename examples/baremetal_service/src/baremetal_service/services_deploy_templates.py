"""Deploy templates (``/v1/deploy_templates``, Ironic 1.55): named sets of deploy steps.

The CRUD is the generic one (:mod:`baremetal_service.crud`), declared in
:mod:`baremetal_service.resources.deploy_templates`.  A template's ``name`` is a trait
(``CUSTOM_...``) and its steps are unique per (interface, step): the API layer checks
the JSON schema, :func:`normalise_steps` the rest (runbooks' steps too).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from typing import Any

from . import exceptions as exc

__all__ = ["normalise_steps"]


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
