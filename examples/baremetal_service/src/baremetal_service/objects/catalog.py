"""Every declared resource of the API, in one place.

Each ``objects/<resource>.py`` declares its resources (``DECLARED``: one
:class:`~baremetal_service.objects.resource.Resource` each) beside the rules they
follow; this module lists them in a stable order, nodes first.  The HTTP layer
(:mod:`baremetal_service.handlers.resources`), the service facade and the OpenAPI
generator all read the declarations from here.
"""

from __future__ import annotations

from typing import Final

from baremetal_service.objects import (
    allocations,
    chassis,
    conductors,
    deploy_templates,
    inspection_rules,
    nodes,
    portgroups,
    ports,
    runbooks,
    volume,
)
from baremetal_service.objects.resource import Resource

__all__ = ["declarations"]

_DECLARATIONS: Final[tuple[Resource, ...]] = (
    *nodes.DECLARED, *ports.DECLARED, *portgroups.DECLARED, *chassis.DECLARED, *volume.DECLARED,
    *conductors.DECLARED, *allocations.DECLARED, *deploy_templates.DECLARED, *runbooks.DECLARED,
    *inspection_rules.DECLARED,
)  # fmt: skip


def declarations() -> tuple[Resource, ...]:
    """Every declared resource, in a stable order (nodes first)."""
    return _DECLARATIONS
