"""Volume connectors and targets (``/v1/volume/connectors|targets``, Ironic 1.32).

Node-scoped like ports (scope ``node``, policy ``baremetal:volume``); the power-state
rules are :mod:`baremetal_service.services_volume`'s, and the write carries them as
conditions (``node_powered_off``, ``node_deletable``), so they hold atomically.
"""

from __future__ import annotations

from typing import Any, Final

from ..api import versions
from ..api.volume_schemas import CONNECTOR_CREATE, TARGET_CREATE
from ..services_volume import check_delete, check_update
from . import Resource

_COMMON_VERSIONS: Final = {"etag": versions.ETAG_VERSION}
_COMMON: Final[dict[str, Any]] = {
    "field_versions": _COMMON_VERSIONS,
    "since": versions.VOLUME,
    "filters": (("node", versions.VOLUME),),
    "detail_since": versions.VOLUME,
    "ignored_args": ("project",),
    "scope": "node",
    "policy": "baremetal:volume",
    "relations": {"node_uuid": "node"},
    "list_filters": {"node": "node_uuid"},
    "null_defaults": {"extra": {}, "properties": {}},
    "check_update": check_update,
    "check_delete": check_delete,
    "update_conditions": ("node_powered_off",),
    "delete_conditions": ("node_deletable",),
    "routes": False,  # api/volume.py: UUID-only paths, the /v1/volume index, node lists
}

CONNECTORS: Final = Resource(
    kind="connector",
    collection="volume/connectors",
    fields=(
        "uuid",
        "created_at",
        "updated_at",
        "connector_id",
        "extra",
        "type",
        "links",
        "node_uuid",
        "etag",
    ),
    list_fields=("uuid", "node_uuid", "type", "connector_id"),
    create_schema=CONNECTOR_CREATE,
    patchable=("type", "connector_id", "node_uuid", "extra"),
    sort_keys=("uuid", "type", "connector_id", "created_at", "updated_at"),
    list_key="connectors",
    store="volume_connector",
    label="volume connector",
    **_COMMON,
)
TARGETS: Final = Resource(
    kind="target",
    collection="volume/targets",
    fields=(
        "uuid",
        "created_at",
        "updated_at",
        "boot_index",
        "extra",
        "properties",
        "volume_id",
        "volume_type",
        "links",
        "node_uuid",
        "etag",
    ),  # fmt: skip
    list_fields=("uuid", "node_uuid", "volume_type", "boot_index", "volume_id"),
    create_schema=TARGET_CREATE,
    patchable=("volume_type", "properties", "boot_index", "volume_id", "node_uuid", "extra"),
    sort_keys=("uuid", "volume_type", "boot_index", "volume_id", "created_at", "updated_at"),
    list_key="targets",
    store="volume_target",
    label="volume target",
    **_COMMON,
)
DECLARED: Final = (CONNECTORS, TARGETS)
