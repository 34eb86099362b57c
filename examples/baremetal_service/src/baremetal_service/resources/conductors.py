"""Conductors (``/v1/conductors``, Ironic 1.49): read-only, keyed by hostname.

Served by :mod:`baremetal_service.api.conductors` from the heartbeat table
(:mod:`baremetal_service.services_conductors`); the declaration describes the fields.
"""

from __future__ import annotations

from typing import Final

from ..api import versions
from . import Resource

CONDUCTORS: Final = Resource(
    kind="conductor",
    collection="conductors",
    field_versions=versions.CONDUCTOR_FIELD_VERSIONS,
    fields=("hostname", "conductor_group", "alive", "drivers", "created_at", "updated_at", "links"),
    list_fields=("hostname", "conductor_group", "alive"),
    create_schema={},
    patchable=(),
    sort_keys=("hostname", "conductor_group", "created_at", "updated_at"),
    since=versions.CONDUCTORS,
    read_only=True,
    own_controller=True,
    routes=False,
)
DECLARED: Final = (CONDUCTORS,)
