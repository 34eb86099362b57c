"""The microversion history of the bare-metal API, with Ironic's own numbers.

Versions 1.1 .. 1.115 carry the numbers OpenStack Ironic gave them
(``ironic/api/controllers/v1/versions.py`` and ``utils.py``), so that a client
asking for version N sees the fields and verbs Ironic shows at N.  Our own
features start above Ironic 39's maximum:

* 1.116 -- etags: ``etag`` in bodies and the ``ETag`` header, ``If-Match`` honoured.
* 1.117 -- resource classes: ``/v1/resource_classes`` with an idempotent ``PUT``.

Only the versions that change something this service implements are listed
in :data:`HISTORY`; every number in between is still served (it behaves like
the nearest lower listed one), exactly as Ironic serves them.

Each resource declares its fields as :class:`Fields` (Ironic's order and the version each
appears in, ``objects/<resource>.py``); apimw's :class:`~apimw.VersionedFields` answers which
of them a version shows.  Version strings are parsed by apimw
(:func:`parse`), as strictly as the microversion middleware parses the headers.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

from apimw import Version, VersionedFields, parse_version
from apimw.errors import VersionParseError

#: The service's own version header (Ironic's), besides apimw's standard OpenStack-API-Version.
LEGACY_HEADER: Final = "X-OpenStack-Ironic-API-Version"

MIN_VERSION: Final = Version(1, 1)
#: Ironic 39.0's maximum; everything up to here means what it means in Ironic.
IRONIC_MAX_VERSION: Final = Version(1, 115)
ETAG_VERSION: Final = Version(1, 116)
RESOURCE_CLASS_VERSION: Final = Version(1, 117)
MAX_VERSION: Final = RESOURCE_CLASS_VERSION
#: A field (filter...) there from its resource's first version.
FIRST: Final = MIN_VERSION

# -- features (Ironic's numbers) --------------------------------------------------------------
AVAILABLE_STATE: Final = Version(1, 2)
MANAGEABLE_STATE: Final = Version(1, 4)
NODE_NAME: Final = Version(1, 5)
INSPECT_STATE: Final = Version(1, 6)
FIELDS_SELECTOR: Final = Version(1, 8)
PROVISION_STATE_FILTER: Final = Version(1, 9)
ENROLL_STATE: Final = Version(1, 11)
LINKS_NODE_STATES: Final = Version(1, 14)
MANUAL_CLEAN: Final = Version(1, 15)
DRIVER_FILTER: Final = Version(1, 16)
LOOKUP_HEARTBEAT: Final = Version(1, 22)
PORTGROUPS: Final = Version(1, 23)
PORTGROUPS_SUBCONTROLLERS: Final = Version(1, 24)
SOFT_POWER_OFF: Final = Version(1, 27)
NODE_VIFS: Final = Version(1, 28)
NODE_TRAITS: Final = Version(1, 37)
VIF_ATTACH_PORT: Final = Version(1, 67)
SHARDS: Final = Version(1, 82)
PARENT_NODE: Final = Version(1, 83)
NODE_FIRMWARE: Final = Version(1, 86)
NODE_VMEDIA: Final = Version(1, 89)
DETAIL_QUERY: Final = Version(1, 43)
VOLUME: Final = Version(1, 32)
INSPECTION_RULES: Final = Version(1, 96)
CONDUCTORS: Final = Version(1, 49)
ALLOCATIONS: Final = Version(1, 52)
EVENTS: Final = Version(1, 54)
DEPLOY_TEMPLATES: Final = Version(1, 55)
ALLOCATION_UPDATE: Final = Version(1, 57)
ALLOCATION_BACKFILL: Final = Version(1, 58)
ALLOCATION_OWNER: Final = Version(1, 60)
RUNBOOKS: Final = Version(1, 92)
RUNBOOK_TRAITS: Final = Version(1, 112)
DEPLOY_UNDEPLOY_VERBS: Final = Version(1, 73)
#: ``PUT /v1/nodes/{id}/states/boot_mode`` and ``.../states/secure_boot``.
NODE_CHANGE_BOOT_MODE: Final = Version(1, 76)
NODE_HISTORY: Final = Version(1, 78)
NODE_HISTORY_PROJECT: Final = Version(1, 113)
NODE_HISTORY_FIELDS: Final = Version(1, 115)

#: One line per version this service gives a meaning to (docs/example/baremetal-service.md mirrors it).
HISTORY: Final[tuple[tuple[Version, str], ...]] = (
    (Version(1, 1), "Initial version: nodes, ports, chassis, drivers, states, maintenance, validate."),
    (Version(1, 2), 'Renamed NOSTATE (None) to AVAILABLE ("available").'),
    (Version(1, 3), "Node driver_internal_info."),
    (Version(1, 4), "MANAGEABLE state; 'manage' and 'provide' verbs."),
    (Version(1, 5), "Logical node names (node name)."),
    (Version(1, 6), "INSPECT* states, 'inspect' verb, inspection_started_at/finished_at."),
    (Version(1, 7), "Node clean_step."),
    (Version(1, 8), "'fields' query parameter selects a subset of fields."),
    (Version(1, 9), "Filter nodes by provision_state."),
    (Version(1, 11), "New nodes start in ENROLL (before: AVAILABLE)."),
    (Version(1, 12), "Node raid_config and target_raid_config; PUT /v1/nodes/{id}/states/raid."),
    (Version(1, 14), "Links to node states."),
    (Version(1, 15), "Manual cleaning: 'clean' verb."),
    (Version(1, 16), "Filter nodes by driver."),
    (Version(1, 18), "Port internal_info."),
    (Version(1, 19), "Port local_link_connection and pxe_enabled."),
    (Version(1, 20), "Node network_interface."),
    (Version(1, 21), "Node resource_class; filter nodes by resource_class."),
    (Version(1, 23), "Portgroups."),
    (Version(1, 24), "Node and portgroup subresources /portgroups and /ports; port portgroup_uuid."),
    (Version(1, 26), "Portgroup mode and properties."),
    (Version(1, 27), "Soft power off, soft reboot and power timeout."),
    (Version(1, 28), "Node VIFs: /v1/nodes/{id}/vifs (attach, list, detach)."),
    (Version(1, 31), "Node hardware interface fields (boot_interface, deploy_interface, ...)."),
    (
        VOLUME,
        "Volume connectors and targets: /v1/volume, /v1/volume/connectors, /v1/volume/targets, "
        "/v1/nodes/{id}/volume.",
    ),
    (Version(1, 33), "Node storage_interface."),
    (Version(1, 34), "Port physical_network."),
    (Version(1, 37), "Node traits: the traits field and /v1/nodes/{id}/traits."),
    (Version(1, 38), "Node rescue_interface."),
    (Version(1, 40), "Node bios_interface."),
    (Version(1, 42), "Node fault."),
    (Version(1, 43), "'detail' query parameter on lists."),
    (Version(1, 44), "Node deploy_step."),
    (Version(1, 46), "Node conductor_group."),
    (Version(1, 47), "Node automated_clean."),
    (Version(1, 48), "Node protected and protected_reason."),
    (Version(1, 49), "Node conductor; /v1/conductors (the live conductors, from their heartbeats)."),
    (Version(1, 50), "Node owner."),
    (Version(1, 51), "Node description."),
    (Version(1, 52), "Allocations: /v1/allocations, /v1/nodes/{id}/allocation; node allocation_uuid."),
    (Version(1, 53), "Port is_smartnic."),
    (EVENTS, "POST /v1/events: external network events (checked, logged, 204)."),
    (Version(1, 55), "Deploy templates: /v1/deploy_templates."),
    (Version(1, 57), "PATCH /v1/allocations/{id} (name, extra)."),
    (Version(1, 58), "Allocation backfill: POST /v1/allocations with node."),
    (Version(1, 60), "Allocation owner."),
    (Version(1, 61), "Node retired and retired_reason; filter nodes by retired."),
    (Version(1, 65), "Node lessee."),
    (Version(1, 66), "Node network_data."),
    (Version(1, 67), "VIF attach names a port_uuid or a portgroup_uuid (not both)."),
    (Version(1, 73), "'deploy' and 'undeploy' verbs (aliases of 'active' and 'deleted')."),
    (Version(1, 75), "Node boot_mode and secure_boot."),
    (
        NODE_HISTORY,
        "Node history: /v1/nodes/{id}/history (an ERROR entry whenever a failure sets "
        "last_error) and /v1/nodes/{id}/history/{event}.",
    ),
    (Version(1, 82), "Node shard."),
    (Version(1, 83), "Node parent_node."),
    (Version(1, 86), "Node firmware_interface; /v1/nodes/{id}/firmware."),
    (Version(1, 87), "Node service_step."),
    (Version(1, 88), "Port name."),
    (Version(1, 89), "Node virtual media: POST/DELETE /v1/nodes/{id}/vmedia."),
    (Version(1, 92), "Runbooks: /v1/runbooks."),
    (Version(1, 95), "Node disable_power_off."),
    (INSPECTION_RULES, "Inspection rules: /v1/inspection_rules."),
    (Version(1, 97), "Port description."),
    (Version(1, 100), "Port vendor."),
    (Version(1, 101), "Port category."),
    (Version(1, 102), "Portgroup physical_network."),
    (Version(1, 103), "Portgroup category."),
    (
        Version(1, 104),
        "Node instance_name (filled from instance_info.display_name); filter nodes by instance_name.",
    ),
    (Version(1, 109), "Node health."),
    (Version(1, 111), "Port available_for_dynamic_portgroup; portgroup dynamic_portgroup."),
    (
        Version(1, 112),
        "Runbook traits (/v1/runbooks/{id}/traits) and description; any logical name for a runbook.",
    ),
    (NODE_HISTORY_PROJECT, "Node history entries show project."),
    (
        NODE_HISTORY_FIELDS,
        "Node history entries show state, target_provision_state and duration_seconds "
        "(Ironic 39.0's maximum).",
    ),
    (
        ETAG_VERSION,
        "apimw: etag in node/port/portgroup/chassis bodies and the ETag header; "
        "If-Match on PUT/PATCH/DELETE answers 412 when stale.",
    ),
    (
        RESOURCE_CLASS_VERSION,
        "apimw: /v1/resource_classes; PUT /v1/resource_classes/{name} with an empty "
        "body creates (201) or confirms (204) a CUSTOM_ class.",
    ),
)

#: Provision verbs and the version that introduced them (Ironic's MIN_VERB_VERSIONS).
VERB_VERSIONS: Final[dict[str, Version]] = {
    "manage": MANAGEABLE_STATE,
    "provide": MANAGEABLE_STATE,
    "inspect": INSPECT_STATE,
    "abort": Version(1, 13),
    "clean": MANUAL_CLEAN,
    "adopt": Version(1, 17),
    "rescue": Version(1, 38),
    "unrescue": Version(1, 38),
    "deploy": DEPLOY_UNDEPLOY_VERBS,
    "undeploy": DEPLOY_UNDEPLOY_VERBS,
}


class Fields(VersionedFields):
    """A resource's fields in Ironic's order, each with the microversion it appears in.

    ``Fields({"uuid": FIRST, ..., "etag": ETAG_VERSION})``: a field at :data:`FIRST` is there
    from the resource's first version.  apimw's VersionedFields answers for the others
    (``since``, ``hidden``, ``visible``); :attr:`names` keeps the order documents show.
    """

    def __init__(self, since: Mapping[str, Version]) -> None:
        super().__init__({name: version for name, version in since.items() if version > FIRST})
        #: every field, in Ironic's order
        self.names: Final = tuple(since)

    def at(self, version: Version) -> tuple[str, ...]:
        """The fields a document shows at *version*, in order."""
        return self.visible(self.names, version)


def parse(text: str) -> Version:
    """``"1.52"`` or ``"latest"`` (any case) -> a served Version; ``ValueError`` otherwise.

    apimw's parser decides what a version is (``1.05``, ``01.5`` and non-ASCII digits are
    not), then the version must be within the served range.
    """
    value = text.strip()
    if value.lower() == "latest":
        return MAX_VERSION
    try:
        version = parse_version(value)
    except VersionParseError as exc:
        raise ValueError(f"{exc} (or 'latest')") from None
    if not version.matches(MIN_VERSION, MAX_VERSION):
        raise ValueError(f"version {version} is outside the served range [{MIN_VERSION}, {MAX_VERSION}]")
    return version
