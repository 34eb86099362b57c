"""Every resource declaration of the API, in one place.

A stop-gap for ``baremetal_service.api.resources.declarations()`` (the one-declaration-per-
resource reshaping provides it): the OpenAPI generator imports that one when it exists and
falls back to this.  Each item has the attributes of :class:`~.resources.Resource` the
generator reads (kind, collection, field_versions, fields, list_fields, create_schema,
patchable, sort_keys, since, filters, list_key, sublinks).  Nodes are not a ``Resource``
(they have their own controller): the generator reads their tables directly.
"""

from __future__ import annotations

from .resources import Resource


def declarations() -> tuple[Resource, ...]:
    """The declared resources, in the order of the /v1 links."""
    from .allocations import ALLOCATIONS
    from .chassis import CHASSIS
    from .deploy_templates import DEPLOY_TEMPLATES
    from .inspection_rules import RULES
    from .portgroups import PORTGROUPS
    from .ports import PORTS
    from .runbooks import RUNBOOKS
    from .volume import CONNECTORS, TARGETS

    return (CHASSIS, PORTS, PORTGROUPS, ALLOCATIONS, DEPLOY_TEMPLATES, RUNBOOKS, CONNECTORS, TARGETS, RULES)
