"""SQLAlchemy 2 models of the bare-metal service.

Tables: ``nodes``, ``ports`` (unique MAC address), ``portgroups``, ``chassis``,
``resource_classes`` and ``node_events`` (the notification records, one row per
create/update/delete/state change, carrying the resource's etag).

Column names follow Ironic's field names.  Internal columns:

* ``id``: integer primary key, used for foreign keys and the default sort order.
* ``reservation`` / ``reserved_at``: the conductor lease on a node, claimed
  atomically with ``UPDATE ... WHERE reservation IS NULL`` (see ``db.api``).
* ``pending_action``: the queued asynchronous work (``"provision:<verb>"`` or
  ``"power"``) that a conductor worker carries out; cleared in the same UPDATE
  that releases the reservation, so the work is done once.
* ``etag``: ``W/"<hex>"``, recomputed on every create and modify in one place
  (``baremetal_service.service``); added by its own migration (0002).

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
    String,
    Text,
    UniqueConstraint,
)
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.engine import Dialect
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column
from sqlalchemy.types import TypeDecorator, TypeEngine

from .driver_select import with_source

__all__ = ["Base", "Chassis", "Node", "NodeEvent", "Port", "Portgroup", "ResourceClass", "JSONType"]

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

        @with_source('{} if _v_ == "{}" else [] if _v_ == "[]" else _p_(_v_)')
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

        @with_source("None if _v_ is None else _p_(_v_)")
        def process(value: Any) -> Any:
            return parse(value) if isinstance(value, str) else value

        return process


#: JSON on SQLite, JSONB on PostgreSQL.
JSONType = FastJSON()
ETAG_LENGTH = 140  # W/"<128 hex>" is 132 characters; a little room for a longer prefix


class Base(DeclarativeBase):
    pass


class Chassis(Base):
    __tablename__ = "chassis"
    __table_args__ = (UniqueConstraint("uuid", name="uniq_chassis0uuid"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    uuid: Mapped[str] = mapped_column(String(36), nullable=False)
    description: Mapped[str | None] = mapped_column(String(255))
    extra: Mapped[dict[str, Any]] = mapped_column(JSONType, nullable=False, default=dict)
    created_at: Mapped[dt.datetime] = mapped_column(UTCDateTime, nullable=False)
    updated_at: Mapped[dt.datetime | None] = mapped_column(UTCDateTime)
    etag: Mapped[str | None] = mapped_column(String(ETAG_LENGTH))


class Node(Base):
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

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    uuid: Mapped[str] = mapped_column(String(36), nullable=False)
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
    created_at: Mapped[dt.datetime] = mapped_column(UTCDateTime, nullable=False)
    updated_at: Mapped[dt.datetime | None] = mapped_column(UTCDateTime)
    etag: Mapped[str | None] = mapped_column(String(ETAG_LENGTH))


class Portgroup(Base):
    __tablename__ = "portgroups"
    __table_args__ = (
        UniqueConstraint("uuid", name="uniq_portgroups0uuid"),
        UniqueConstraint("name", name="uniq_portgroups0name"),
        UniqueConstraint("address", name="uniq_portgroups0address"),
        Index("portgroups_node_id_idx", "node_id"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    uuid: Mapped[str] = mapped_column(String(36), nullable=False)
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
    created_at: Mapped[dt.datetime] = mapped_column(UTCDateTime, nullable=False)
    updated_at: Mapped[dt.datetime | None] = mapped_column(UTCDateTime)
    etag: Mapped[str | None] = mapped_column(String(ETAG_LENGTH))


class Port(Base):
    __tablename__ = "ports"
    __table_args__ = (
        UniqueConstraint("uuid", name="uniq_ports0uuid"),
        UniqueConstraint("address", name="uniq_ports0address"),
        UniqueConstraint("name", name="uniq_ports0name"),
        Index("ports_node_id_idx", "node_id"),
        Index("ports_portgroup_id_idx", "portgroup_id"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    uuid: Mapped[str] = mapped_column(String(36), nullable=False)
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
    created_at: Mapped[dt.datetime] = mapped_column(UTCDateTime, nullable=False)
    updated_at: Mapped[dt.datetime | None] = mapped_column(UTCDateTime)
    etag: Mapped[str | None] = mapped_column(String(ETAG_LENGTH))


class ResourceClass(Base):
    __tablename__ = "resource_classes"
    __table_args__ = (UniqueConstraint("name", name="uniq_resource_classes0name"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    name: Mapped[str] = mapped_column(String(255), nullable=False)
    created_at: Mapped[dt.datetime] = mapped_column(UTCDateTime, nullable=False)
    updated_at: Mapped[dt.datetime | None] = mapped_column(UTCDateTime)


class NodeEvent(Base):
    """A notification record: what happened to which resource, with its etag then."""

    __tablename__ = "node_events"
    __table_args__ = (Index("node_events_resource_uuid_idx", "resource_uuid"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    event_type: Mapped[str] = mapped_column(String(64), nullable=False)
    resource_type: Mapped[str] = mapped_column(String(16), nullable=False)
    resource_uuid: Mapped[str] = mapped_column(String(36), nullable=False)
    payload: Mapped[dict[str, Any]] = mapped_column(JSONType, nullable=False, default=dict)
    created_at: Mapped[dt.datetime] = mapped_column(UTCDateTime, nullable=False)
    etag: Mapped[str | None] = mapped_column(String(ETAG_LENGTH))


# Models of other modules on the same Base, so the metadata (and alembic's comparison) knows them.
from . import (  # noqa: E402
    models_collections_a,  # noqa: F401  (allocations, conductors, deploy templates, runbooks)
    models_collections_b,  # noqa: F401  (volume connectors and targets, inspection rules; 0005)
    models_node_features,  # noqa: F401  (appends nodes.traits; migration 0003)
    models_node_history,  # noqa: F401  (node history, 1.78; migration 0007)
)
