"""Deploy templates (``/v1/deploy_templates``, Ironic 1.55): named sets of deploy steps.

Global (Ironic's policy is system-scoped, served here to every caller as before).  A
template's ``name`` is a trait (``CUSTOM_...``, the schema) and its steps are unique
per (interface, step) (:func:`~baremetal_service.services_deploy_templates.normalise_steps`).
"""

from __future__ import annotations

from typing import Any, Final

from ..api import versions
from ..api.collections_a_schemas import DEPLOY_TEMPLATE_CREATE
from ..services_deploy_templates import normalise_steps
from . import Resource


def normalise(values: dict[str, Any], creating: bool) -> dict[str, Any]:
    if "steps" in values:
        values["steps"] = normalise_steps(values["steps"], "priority", "deploy")
    return values


DEPLOY_TEMPLATES: Final = Resource(
    kind="deploy_template",
    collection="deploy_templates",
    field_versions=versions.DEPLOY_TEMPLATE_FIELD_VERSIONS,
    fields=("uuid", "created_at", "updated_at", "name", "extra", "links", "steps", "etag"),
    list_fields=("uuid", "name"),
    create_schema=DEPLOY_TEMPLATE_CREATE,
    patchable=("extra", "name", "steps", "description"),
    sort_keys=("uuid", "name", "created_at", "updated_at"),
    since=versions.DEPLOY_TEMPLATES,
    defaults={"steps": []},
    updatable=frozenset({"name", "description", "steps", "extra"}),
    null_defaults={"extra": {}},
    normalise=normalise,
)
DECLARED: Final = (DEPLOY_TEMPLATES,)
