"""SQLAlchemy 2 models of the bare-metal service: every table, on one declarative base.

Tables: ``nodes``, ``ports`` (unique MAC address), ``portgroups``, ``chassis``,
``resource_classes`` and ``node_events`` (the notification records, one row per
create/update/delete/state change, carrying the resource's etag) (migrations 0001, 0002);
the node's ``traits`` (0003); ``allocations``, ``conductors``, ``deploy_templates`` and
``runbooks`` (0004); ``volume_connectors``, ``volume_targets`` and ``inspection_rules``
(0005); ``node_history`` (0007); ``client_tokens`` (0008).

Column names follow Ironic's field names.  Internal columns:

* ``id``: integer primary key, used for foreign keys and the default sort order.
* ``reservation`` / ``reserved_at``: the conductor lease on a node, claimed
  atomically with ``UPDATE ... WHERE reservation IS NULL`` (see ``db.api``).
* ``pending_action``: the queued asynchronous work (``"provision:<verb>"`` or
  ``"power"``) that a conductor worker carries out; cleared in the same UPDATE
  that releases the reservation, so the work is done once.
* ``etag``: ``W/"<hex>"``, recomputed on every create and modify in one place
  (``baremetal_service.db.api``); added by its own migration (0002).
* ``traits``: Ironic keeps them in a ``node_traits`` table; the wire shows them as one
  list field of the node (1.37) that changes like any other field, so here they are a
  JSON list column of ``nodes``: a trait change is an ordinary node write (one
  compare-and-swap UPDATE that also recomputes the etag).

The schema itself is created by the alembic migrations in ``db/migrations``; these
models are kept identical to them (a test compares the two).
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Callable
from typing import Any, Final

from sqlalchemy import (
    JSON,
    Boolean,
    DateTime,
    ForeignKey,
    Index,
    Integer,
    PrimaryKeyConstraint,
    String,
    Text,
    UniqueConstraint,
    text,
)
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.engine import Dialect
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column
from sqlalchemy.types import TypeDecorator, TypeEngine

__all__ = [
    "TRAITS_SERVER_DEFAULT",
    "Allocation",
    "Base",
    "Chassis",
    "ClientTokenRecord",
    "ConductorRecord",
    "DeployTemplate",
    "InspectionRule",
    "JSONType",
    "Node",
    "NodeEvent",
    "NodeHistory",
    "Port",
    "Portgroup",
    "ResourceClass",
    "Runbook",
    "VolumeConnector",
    "VolumeTarget",
]

_EMPTY_JSON: Final = frozenset({"{}", b"{}"})
_EMPTY_LIST: Final = frozenset({"[]", b"[]"})


def fast_json_loads(value: str | bytes) -> Any:
    """``json.loads`` with a shortcut for ``{}`` (most of a node's JSON columns) and ``[]``
    (a node without traits)."""
    if value in _EMPTY_JSON:
        return {}
    if value in _EMPTY_LIST:
        return []
    return json.loads(value)


class FastJSON(TypeDecorator[Any]):
    """JSON on SQLite, JSONB on PostgreSQL; decoding ``{}`` or ``[]`` costs nothing.

    The DDL is SQLAlchemy's JSON/JSONB; only the SQLite result processing is
    replaced (SQLAlchemy's runs a regex and ``json.loads`` on every value).  On
    PostgreSQL psycopg decodes JSONB itself (see ``engine.create_engine``, which
    installs the same shortcut there).
    """

    impl = JSON
    cache_ok = True

    def load_dialect_impl(self, dialect: Dialect) -> TypeEngine[Any]:
        if dialect.name == "postgresql":
            return dialect.type_descriptor(JSONB())
        return dialect.type_descriptor(JSON())

    def bind_processor(self, dialect: Dialect) -> Callable[[Any], Any] | None:
        process = super().bind_processor(dialect)
        if dialect.name != "sqlite" or process is None:
            return process
        serialize = process

        def bind(value: Any) -> Any:
            # ``{}`` (most of a node's JSON columns) is the text json.dumps gives it
            if value.__class__ is dict and not value:
                return "{}"
            return serialize(value)

        return bind

    def result_processor(self, dialect: Dialect, coltype: object) -> Callable[[Any], Any] | None:
        if dialect.name != "sqlite":
            return super().result_processor(dialect, coltype)

        loads = json.loads

        def process(value: Any) -> Any:
            if value == "{}":
                return {}
            if value == "[]":
                return []
            if value is None or value.__class__ is not str:
                return value
            return loads(value)

        return process


class UTCDateTime(TypeDecorator[dt.datetime]):
    """A naive UTC ``DateTime``; on SQLite parsed with ``datetime.fromisoformat`` (C) instead
    of SQLAlchemy's regex.  Stored exactly as SQLAlchemy's SQLite DATETIME stores it."""

    impl = DateTime
    cache_ok = True

    def result_processor(self, dialect: Dialect, coltype: object) -> Callable[[Any], Any] | None:
        if dialect.name != "sqlite":
            return super().result_processor(dialect, coltype)
        parse = dt.datetime.fromisoformat

        def process(value: Any) -> Any:
            return parse(value) if isinstance(value, str) else value

        return process


#: JSON on SQLite, JSONB on PostgreSQL.
JSONType = FastJSON()
ETAG_LENGTH = 140  # W/"<128 hex>" is 132 characters; a little room for a longer prefix
#: Rows that predate ``nodes.traits`` get an empty list (migration 0003's server default too).
TRAITS_SERVER_DEFAULT = "'[]'"


class Base(DeclarativeBase):
    pass


# -- the columns many tables share, in the places the migrations give them: ``id`` (and a
# resource's ``uuid``) first, the table's own columns, then ``created_at``, ``updated_at``
# and ``etag`` (``sort_order`` puts a mixin's columns there: by default they would follow
# the class's own).


class _Id:
    """The integer primary key (every table but ``client_tokens``)."""

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True, sort_order=-2)


class _Timestamps:
    """When the row was created and last updated."""

    created_at: Mapped[dt.datetime] = mapped_column(UTCDateTime, nullable=False, sort_order=1)
    updated_at: Mapped[dt.datetime | None] = mapped_column(UTCDateTime, sort_order=1)


class _Resource(_Id, _Timestamps):
    """The table of an API resource (the migrations' ``create_resource_table``): ``id``,
    ``uuid``, its own columns, ``created_at``, ``updated_at``, ``etag``."""

    uuid: Mapped[str] = mapped_column(String(36), nullable=False, sort_order=-1)
    etag: Mapped[str | None] = mapped_column(String(ETAG_LENGTH), sort_order=2)


class Chassis(_Resource, Base):
    __tablename__ = "chassis"
    __table_args__ = (UniqueConstraint("uuid", name="uniq_chassis0uuid"),)

    description: Mapped[str | None] = mapped_column(String(255))
    extra: Mapped[dict[str, Any]] = mapped_column(JSONType, nullable=False, default=dict)


class Node(_Resource, Base):
    __tablename__ = "nodes"
    __table_args__ = (
        UniqueConstraint("uuid", name="uniq_nodes0uuid"),
        UniqueConstraint("name", name="uniq_nodes0name"),
        UniqueConstraint("instance_uuid", name="uniq_nodes0instance_uuid"),
        Index("nodes_provision_state_idx", "provision_state"),
        Index("nodes_driver_idx", "driver"),
        Index("nodes_resource_class_idx", "resource_class"),
        Index("nodes_pending_action_idx", "pending_action"),
        Index("nodes_chassis_id_idx", "chassis_id"),
    )

    name: Mapped[str | None] = mapped_column(String(255))
    description: Mapped[str | None] = mapped_column(Text)
    driver: Mapped[str] = mapped_column(String(255), nullable=False)
    driver_info: Mapped[dict[str, Any]] = mapped_column(JSONType, nullable=False, default=dict)
    driver_internal_info: Mapped[dict[str, Any]] = mapped_column(JSONType, nullable=False, default=dict)
    properties: Mapped[dict[str, Any]] = mapped_column(JSONType, nullable=False, default=dict)
    extra: Mapped[dict[str, Any]] = mapped_column(JSONType, nullable=False, default=dict)
    instance_info: Mapped[dict[str, Any]] = mapped_column(JSONType, nullable=False, default=dict)
    instance_uuid: Mapped[str | None] = mapped_column(String(36))
    resource_class: Mapped[str | None] = mapped_column(String(80))
    chassis_id: Mapped[int | None] = mapped_column(ForeignKey("chassis.id"))
    # states
    provision_state: Mapped[str] = mapped_column(String(15), nullable=False)
    target_provision_state: Mapped[str | None] = mapped_column(String(15))
    power_state: Mapped[str | None] = mapped_column(String(15))
    target_power_state: Mapped[str | None] = mapped_column(String(15))
    provision_updated_at: Mapped[dt.datetime | None] = mapped_column(UTCDateTime)
    inspection_started_at: Mapped[dt.datetime | None] = mapped_column(UTCDateTime)
    inspection_finished_at: Mapped[dt.datetime | None] = mapped_column(UTCDateTime)
    last_error: Mapped[str | None] = mapped_column(Text)
    maintenance: Mapped[bool] = mapped_column(Boolean, nullable=False, default=False)
    maintenance_reason: Mapped[str | None] = mapped_column(Text)
    clean_step: Mapped[dict[str, Any]] = mapped_column(JSONType, nullable=False, default=dict)
    deploy_step: Mapped[dict[str, Any]] = mapped_column(JSONType, nullable=False, default=dict)
    # ownership and flags
    owner: Mapped[str | None] = mapped_column(String(255))
    lessee: Mapped[str | None] = mapped_column(String(255))
    conductor_group: Mapped[str] = mapped_column(String(255), nullable=False, default="")
    protected: Mapped[bool] = mapped_column(Boolean, nullable=False, default=False)
    protected_reason: Mapped[str | None] = mapped_column(Text)
    retired: Mapped[bool] = mapped_column(Boolean, nullable=False, default=False)
    retired_reason: Mapped[str | None] = mapped_column(Text)
    automated_clean: Mapped[bool | None] = mapped_column(Boolean)
    disable_power_off: Mapped[bool] = mapped_column(Boolean, nullable=False, default=False)
    console_enabled: Mapped[bool] = mapped_column(Boolean, nullable=False, default=False)
    instance_name: Mapped[str | None] = mapped_column(String(255))
    network_data: Mapped[dict[str, Any]] = mapped_column(JSONType, nullable=False, default=dict)
    shard: Mapped[str | None] = mapped_column(String(255))
    parent_node: Mapped[str | None] = mapped_column(String(36))
    fault: Mapped[str | None] = mapped_column(String(255))
    boot_mode: Mapped[str | None] = mapped_column(String(16))
    secure_boot: Mapped[bool | None] = mapped_column(Boolean)
    raid_config: Mapped[dict[str, Any]] = mapped_column(JSONType, nullable=False, default=dict)
    target_raid_config: Mapped[dict[str, Any]] = mapped_column(JSONType, nullable=False, default=dict)
    service_step: Mapped[dict[str, Any]] = mapped_column(JSONType, nullable=False, default=dict)
    # hardware interfaces (defaults from the hardware type at create time)
    bios_interface: Mapped[str | None] = mapped_column(String(255))
    boot_interface: Mapped[str | None] = mapped_column(String(255))
    console_interface: Mapped[str | None] = mapped_column(String(255))
    deploy_interface: Mapped[str | None] = mapped_column(String(255))
    firmware_interface: Mapped[str | None] = mapped_column(String(255))
    inspect_interface: Mapped[str | None] = mapped_column(String(255))
    management_interface: Mapped[str | None] = mapped_column(String(255))
    network_interface: Mapped[str | None] = mapped_column(String(255))
    power_interface: Mapped[str | None] = mapped_column(String(255))
    raid_interface: Mapped[str | None] = mapped_column(String(255))
    rescue_interface: Mapped[str | None] = mapped_column(String(255))
    storage_interface: Mapped[str | None] = mapped_column(String(255))
    vendor_interface: Mapped[str | None] = mapped_column(String(255))
    # conductor bookkeeping
    reservation: Mapped[str | None] = mapped_column(String(255))
    reserved_at: Mapped[dt.datetime | None] = mapped_column(UTCDateTime)
    pending_action: Mapped[str | None] = mapped_column(String(64))
    # migration 0003 (the last column of the table, as it was added: after etag)
    traits: Mapped[list[str]] = mapped_column(
        JSONType, nullable=False, default=list, server_default=text(TRAITS_SERVER_DEFAULT), sort_order=3
    )


class Portgroup(_Resource, Base):
    __tablename__ = "portgroups"
    __table_args__ = (
        UniqueConstraint("uuid", name="uniq_portgroups0uuid"),
        UniqueConstraint("name", name="uniq_portgroups0name"),
        UniqueConstraint("address", name="uniq_portgroups0address"),
        Index("portgroups_node_id_idx", "node_id"),
    )

    name: Mapped[str | None] = mapped_column(String(255))
    address: Mapped[str | None] = mapped_column(String(18))
    node_id: Mapped[int] = mapped_column(ForeignKey("nodes.id", ondelete="CASCADE"), nullable=False)
    standalone_ports_supported: Mapped[bool] = mapped_column(Boolean, nullable=False, default=True)
    mode: Mapped[str | None] = mapped_column(String(255))
    physical_network: Mapped[str | None] = mapped_column(String(64))
    category: Mapped[str | None] = mapped_column(String(255))
    dynamic_portgroup: Mapped[bool] = mapped_column(Boolean, nullable=False, default=False)
    properties: Mapped[dict[str, Any]] = mapped_column(JSONType, nullable=False, default=dict)
    internal_info: Mapped[dict[str, Any]] = mapped_column(JSONType, nullable=False, default=dict)
    extra: Mapped[dict[str, Any]] = mapped_column(JSONType, nullable=False, default=dict)


class Port(_Resource, Base):
    __tablename__ = "ports"
    __table_args__ = (
        UniqueConstraint("uuid", name="uniq_ports0uuid"),
        UniqueConstraint("address", name="uniq_ports0address"),
        UniqueConstraint("name", name="uniq_ports0name"),
        Index("ports_node_id_idx", "node_id"),
        Index("ports_portgroup_id_idx", "portgroup_id"),
    )

    address: Mapped[str] = mapped_column(String(18), nullable=False)
    name: Mapped[str | None] = mapped_column(String(255))
    description: Mapped[str | None] = mapped_column(String(255))
    node_id: Mapped[int] = mapped_column(ForeignKey("nodes.id", ondelete="CASCADE"), nullable=False)
    portgroup_id: Mapped[int | None] = mapped_column(ForeignKey("portgroups.id"))
    pxe_enabled: Mapped[bool] = mapped_column(Boolean, nullable=False, default=True)
    is_smartnic: Mapped[bool] = mapped_column(Boolean, nullable=False, default=False)
    physical_network: Mapped[str | None] = mapped_column(String(64))
    vendor: Mapped[str | None] = mapped_column(String(255))
    category: Mapped[str | None] = mapped_column(String(255))
    available_for_dynamic_portgroup: Mapped[bool] = mapped_column(Boolean, nullable=False, default=True)
    local_link_connection: Mapped[dict[str, Any]] = mapped_column(JSONType, nullable=False, default=dict)
    internal_info: Mapped[dict[str, Any]] = mapped_column(JSONType, nullable=False, default=dict)
    extra: Mapped[dict[str, Any]] = mapped_column(JSONType, nullable=False, default=dict)


class ResourceClass(_Id, _Timestamps, Base):
    __tablename__ = "resource_classes"
    __table_args__ = (UniqueConstraint("name", name="uniq_resource_classes0name"),)

    name: Mapped[str] = mapped_column(String(255), nullable=False)


class NodeEvent(_Id, Base):
    """A notification record: what happened to which resource, with its etag then."""

    __tablename__ = "node_events"
    __table_args__ = (Index("node_events_resource_uuid_idx", "resource_uuid"),)

    event_type: Mapped[str] = mapped_column(String(64), nullable=False)
    resource_type: Mapped[str] = mapped_column(String(16), nullable=False)
    resource_uuid: Mapped[str] = mapped_column(String(36), nullable=False)
    payload: Mapped[dict[str, Any]] = mapped_column(JSONType, nullable=False, default=dict)
    created_at: Mapped[dt.datetime] = mapped_column(UTCDateTime, nullable=False)
    etag: Mapped[str | None] = mapped_column(String(ETAG_LENGTH))


# -- migration 0004: allocations, deploy templates, runbooks, conductors -------------------------
# ``allocations.node_id`` is unique: a node belongs to at most one allocation, so two
# allocations racing for the same node cannot both take it (the database decides), and a
# node's ``allocation_uuid`` is one outer join away.  ``conductors`` holds one row per
# conductor host, refreshed by its heartbeat (``updated_at``); no etag (read-only over the API).


class Allocation(_Resource, Base):
    __tablename__ = "allocations"
    __table_args__ = (
        UniqueConstraint("uuid", name="uniq_allocations0uuid"),
        UniqueConstraint("name", name="uniq_allocations0name"),
        UniqueConstraint("node_id", name="uniq_allocations0node_id"),
    )

    name: Mapped[str | None] = mapped_column(String(255))
    node_id: Mapped[int | None] = mapped_column(ForeignKey("nodes.id", ondelete="CASCADE"))
    state: Mapped[str] = mapped_column(String(15), nullable=False, default="allocating")
    last_error: Mapped[str | None] = mapped_column(Text)
    resource_class: Mapped[str | None] = mapped_column(String(80))
    traits: Mapped[list[str]] = mapped_column(JSONType, nullable=False, default=list)
    candidate_nodes: Mapped[list[str]] = mapped_column(JSONType, nullable=False, default=list)
    extra: Mapped[dict[str, Any]] = mapped_column(JSONType, nullable=False, default=dict)
    owner: Mapped[str | None] = mapped_column(String(255))


class DeployTemplate(_Resource, Base):
    __tablename__ = "deploy_templates"
    __table_args__ = (
        UniqueConstraint("uuid", name="uniq_deploy_templates0uuid"),
        UniqueConstraint("name", name="uniq_deploy_templates0name"),
    )

    name: Mapped[str] = mapped_column(String(255), nullable=False)
    description: Mapped[str | None] = mapped_column(String(255))
    steps: Mapped[list[dict[str, Any]]] = mapped_column(JSONType, nullable=False, default=list)
    extra: Mapped[dict[str, Any]] = mapped_column(JSONType, nullable=False, default=dict)


class Runbook(_Resource, Base):
    __tablename__ = "runbooks"
    __table_args__ = (
        UniqueConstraint("uuid", name="uniq_runbooks0uuid"),
        UniqueConstraint("name", name="uniq_runbooks0name"),
    )

    name: Mapped[str] = mapped_column(String(255), nullable=False)
    description: Mapped[str | None] = mapped_column(String(255))
    steps: Mapped[list[dict[str, Any]]] = mapped_column(JSONType, nullable=False, default=list)
    traits: Mapped[list[str]] = mapped_column(JSONType, nullable=False, default=list)
    extra: Mapped[dict[str, Any]] = mapped_column(JSONType, nullable=False, default=dict)
    public: Mapped[bool] = mapped_column(Boolean, nullable=False, default=False)
    owner: Mapped[str | None] = mapped_column(String(255))
    disable_ramdisk: Mapped[bool] = mapped_column(Boolean, nullable=False, default=False)


class ConductorRecord(_Id, _Timestamps, Base):
    """One conductor host: written at start, its ``updated_at`` refreshed by each heartbeat."""

    __tablename__ = "conductors"
    __table_args__ = (UniqueConstraint("hostname", name="uniq_conductors0hostname"),)

    hostname: Mapped[str] = mapped_column(String(255), nullable=False)
    conductor_group: Mapped[str] = mapped_column(String(255), nullable=False, default="")
    drivers: Mapped[list[str]] = mapped_column(JSONType, nullable=False, default=list)
    online: Mapped[bool] = mapped_column(Boolean, nullable=False, default=True)


# -- migration 0005: volume connectors and targets, inspection rules ------------------------------
# Ironic's shapes plus the ``etag`` column: a connector is unique per ``(type, connector_id)``
# and a target per ``(node_id, boot_index)`` (Ironic's two 409s); both go with their node
# (``ON DELETE CASCADE``).  An inspection rule's ``conditions`` and ``actions`` are JSON lists.


class VolumeConnector(_Resource, Base):
    __tablename__ = "volume_connectors"
    __table_args__ = (
        UniqueConstraint("uuid", name="uniq_volume_connectors0uuid"),
        UniqueConstraint("type", "connector_id", name="uniq_volume_connectors0type0connector_id"),
        Index("volume_connectors_node_id_idx", "node_id"),
    )

    node_id: Mapped[int] = mapped_column(ForeignKey("nodes.id", ondelete="CASCADE"), nullable=False)
    type: Mapped[str] = mapped_column(String(32), nullable=False)
    connector_id: Mapped[str] = mapped_column(String(255), nullable=False)
    extra: Mapped[dict[str, Any]] = mapped_column(JSONType, nullable=False, default=dict)


class VolumeTarget(_Resource, Base):
    __tablename__ = "volume_targets"
    __table_args__ = (
        UniqueConstraint("uuid", name="uniq_volume_targets0uuid"),
        UniqueConstraint("boot_index", "node_id", name="uniq_volume_targets0boot_index0node_id"),
        Index("volume_targets_node_id_idx", "node_id"),
    )

    node_id: Mapped[int] = mapped_column(ForeignKey("nodes.id", ondelete="CASCADE"), nullable=False)
    volume_type: Mapped[str] = mapped_column(String(64), nullable=False)
    properties: Mapped[dict[str, Any]] = mapped_column(JSONType, nullable=False, default=dict)
    boot_index: Mapped[int] = mapped_column(Integer, nullable=False)
    volume_id: Mapped[str] = mapped_column(String(36), nullable=False)
    extra: Mapped[dict[str, Any]] = mapped_column(JSONType, nullable=False, default=dict)


class InspectionRule(_Resource, Base):
    __tablename__ = "inspection_rules"
    __table_args__ = (
        UniqueConstraint("uuid", name="uniq_inspection_rules0uuid"),
        Index("inspection_rules_phase_idx", "phase"),
    )

    priority: Mapped[int] = mapped_column(Integer, nullable=False, default=0)
    description: Mapped[str | None] = mapped_column(String(255))
    sensitive: Mapped[bool] = mapped_column(Boolean, nullable=False, default=False)
    phase: Mapped[str] = mapped_column(String(16), nullable=False, default="main")
    conditions: Mapped[list[Any]] = mapped_column(JSONType, nullable=False, default=list)
    actions: Mapped[list[Any]] = mapped_column(JSONType, nullable=False, default=list)


# -- migration 0007: node history (Ironic's ``node_history``, 1.78) -------------------------------
# One row per write that sets a node's ``last_error`` to a new text (severity ERROR), in that
# write's transaction (:mod:`.history`); ``state`` and ``target_provision_state`` are the
# node's states when the failure happened.  Rows go with their node (``ON DELETE CASCADE``).


class NodeHistory(_Id, Base):
    __tablename__ = "node_history"
    __table_args__ = (
        UniqueConstraint("uuid", name="uniq_node_history0uuid"),
        Index("node_history_node_id_idx", "node_id"),
    )

    uuid: Mapped[str] = mapped_column(String(36), nullable=False)
    node_id: Mapped[int] = mapped_column(ForeignKey("nodes.id", ondelete="CASCADE"), nullable=False)
    created_at: Mapped[dt.datetime] = mapped_column(UTCDateTime, nullable=False)
    severity: Mapped[str] = mapped_column(String(255), nullable=False)
    event_type: Mapped[str] = mapped_column(String(255), nullable=False)
    event: Mapped[str] = mapped_column(Text, nullable=False)
    conductor: Mapped[str | None] = mapped_column(String(255))
    user: Mapped[str | None] = mapped_column(String(64))
    project: Mapped[str | None] = mapped_column(String(64))
    state: Mapped[str | None] = mapped_column(String(15))
    target_provision_state: Mapped[str | None] = mapped_column(String(15))
    duration_seconds: Mapped[int | None] = mapped_column(Integer)


# -- migration 0008: recorded client tokens (apimw's database-side idempotency guard) -------------
# Every create run with an ``X-Client-Token`` records ``(scope, token)`` here in the
# transaction that inserts the resource (:func:`apimw.idempotency_db.record_token`), so a retry
# whose replay-store record is gone is answered with what the first execution created.  The
# columns are :func:`apimw.idempotency_db.client_tokens_table`'s (a test compares them).


class ClientTokenRecord(Base):
    __tablename__ = "client_tokens"
    __table_args__ = (
        PrimaryKeyConstraint("scope", "token", name="client_tokens_pkey"),
        Index("client_tokens_created_at_idx", "created_at"),
    )

    scope: Mapped[str] = mapped_column(String(255), nullable=False)
    token: Mapped[str] = mapped_column(String(255), nullable=False)
    fingerprint: Mapped[str] = mapped_column(String(64), nullable=False)
    resource_kind: Mapped[str] = mapped_column(String(64), nullable=False)
    resource_id: Mapped[str] = mapped_column(String(255), nullable=False)
    created_at: Mapped[dt.datetime] = mapped_column(DateTime(), nullable=False)
