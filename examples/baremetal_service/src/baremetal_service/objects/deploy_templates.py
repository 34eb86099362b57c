"""Deploy templates (``/v1/deploy_templates``, Ironic 1.55): named sets of deploy steps.

Global (Ironic's policy is system-scoped, served here to every caller as before).  The
CRUD is the generic one (:mod:`baremetal_service.objects.crud`).  A template's ``name``
is a trait (``CUSTOM_...``) and its steps are unique per (interface, step): the HTTP
layer checks the JSON schema, :func:`normalise_steps` the rest (runbooks' steps too).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from typing import Any, Final

from baremetal_service import exceptions as exc
from baremetal_service import versions
from baremetal_service.objects.resource import Resource
from baremetal_service.schemas import DEPLOY_TEMPLATE_CREATE
from baremetal_service.versions import ETAG_VERSION, FIRST, Fields

__all__ = ['normalise_steps']

def normalise(values: dict[str, Any], creating: bool) -> dict[str, Any]:
    if "steps" in values:
        values["steps"] = normalise_steps(values["steps"], "priority", "deploy")
    return values


DEPLOY_TEMPLATES: Final = Resource(
    kind="deploy_template",
    fields=Fields({
        "uuid": FIRST, "created_at": FIRST, "updated_at": FIRST, "name": FIRST, "extra": FIRST,
        "links": FIRST, "steps": FIRST, "etag": ETAG_VERSION,
    }),  # fmt: skip
    list_fields=("uuid", "name"),
    create_schema=DEPLOY_TEMPLATE_CREATE,
    patchable=("extra", "name", "steps", "description"),
    sort_keys=("uuid", "name", "created_at", "updated_at"),
    since=versions.DEPLOY_TEMPLATES,
    refuse_early_writes=True,
    defaults={"steps": []},
    updatable=frozenset({"name", "description", "steps", "extra"}),
    null_defaults={"extra": {}},
    normalise=normalise,
)
DECLARED: Final = (DEPLOY_TEMPLATES,)


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
