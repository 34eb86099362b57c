"""Nodes: their own controller (:mod:`baremetal_service.api.nodes`) and state machinery
(:mod:`baremetal_service.service`, :mod:`baremetal_service.conductor`).

The declaration states their field/version table, list fields, schema, patchable
fields, sort keys and filters in the same form as every other resource (it reads
the tables the node controller uses, so the two cannot disagree).
"""

from __future__ import annotations

from typing import Final

from ..api import nodes, schemas, serialize, versions
from . import Resource

NODES: Final = Resource(
    kind="node",
    collection="nodes",
    field_versions=versions.NODE_FIELD_VERSIONS,
    fields=serialize.NODE_FIELDS,
    list_fields=serialize.NODE_LIST_FIELDS,
    create_schema=schemas.NODE_CREATE,
    patchable=nodes.PATCHABLE,
    sort_keys=nodes.SORT_KEYS,
    filters=nodes._FILTERS,  # noqa: SLF001 - the node controller's table, read as is
    sublinks=tuple(sorted(serialize.NODE_SUBLINKS)),
    scope="node",
    policy="baremetal:node",
    relations={"chassis_uuid": "chassis"},
    etag_ignored=frozenset({"etag", "updated_at", "driver_internal_info", "reservation"}),
    own_controller=True,
    routes=False,
)
DECLARED: Final = (NODES,)
