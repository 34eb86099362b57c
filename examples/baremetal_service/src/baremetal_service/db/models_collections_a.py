"""Tables of allocations, conductors, deploy templates and runbooks (migration 0004).

Column names follow Ironic's field names.  ``allocations.node_id`` is unique: a
node belongs to at most one allocation, so two allocations racing for the same node
cannot both take it (the database decides), and a node's ``allocation_uuid`` is one
outer join away.  ``conductors`` holds one row per conductor host, refreshed by the
conductor's heartbeat (``updated_at``); it has no etag (read-only over the API).
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from sqlalchemy import Boolean, ForeignKey, Integer, String, Text, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from .models import ETAG_LENGTH, Base, JSONType, UTCDateTime

__all__ = ["Allocation", "ConductorRecord", "DeployTemplate", "Runbook"]


class Allocation(Base):
    __tablename__ = "allocations"
    __table_args__ = (
        UniqueConstraint("uuid", name="uniq_allocations0uuid"),
        UniqueConstraint("name", name="uniq_allocations0name"),
        UniqueConstraint("node_id", name="uniq_allocations0node_id"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    uuid: Mapped[str] = mapped_column(String(36), nullable=False)
    name: Mapped[str | None] = mapped_column(String(255))
    node_id: Mapped[int | None] = mapped_column(ForeignKey("nodes.id", ondelete="CASCADE"))
    state: Mapped[str] = mapped_column(String(15), nullable=False, default="allocating")
    last_error: Mapped[str | None] = mapped_column(Text)
    resource_class: Mapped[str | None] = mapped_column(String(80))
    traits: Mapped[list[str]] = mapped_column(JSONType, nullable=False, default=list)
    candidate_nodes: Mapped[list[str]] = mapped_column(JSONType, nullable=False, default=list)
    extra: Mapped[dict[str, Any]] = mapped_column(JSONType, nullable=False, default=dict)
    owner: Mapped[str | None] = mapped_column(String(255))
    created_at: Mapped[dt.datetime] = mapped_column(UTCDateTime, nullable=False)
    updated_at: Mapped[dt.datetime | None] = mapped_column(UTCDateTime)
    etag: Mapped[str | None] = mapped_column(String(ETAG_LENGTH))


class DeployTemplate(Base):
    __tablename__ = "deploy_templates"
    __table_args__ = (
        UniqueConstraint("uuid", name="uniq_deploy_templates0uuid"),
        UniqueConstraint("name", name="uniq_deploy_templates0name"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    uuid: Mapped[str] = mapped_column(String(36), nullable=False)
    name: Mapped[str] = mapped_column(String(255), nullable=False)
    description: Mapped[str | None] = mapped_column(String(255))
    steps: Mapped[list[dict[str, Any]]] = mapped_column(JSONType, nullable=False, default=list)
    extra: Mapped[dict[str, Any]] = mapped_column(JSONType, nullable=False, default=dict)
    created_at: Mapped[dt.datetime] = mapped_column(UTCDateTime, nullable=False)
    updated_at: Mapped[dt.datetime | None] = mapped_column(UTCDateTime)
    etag: Mapped[str | None] = mapped_column(String(ETAG_LENGTH))


class Runbook(Base):
    __tablename__ = "runbooks"
    __table_args__ = (
        UniqueConstraint("uuid", name="uniq_runbooks0uuid"),
        UniqueConstraint("name", name="uniq_runbooks0name"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    uuid: Mapped[str] = mapped_column(String(36), nullable=False)
    name: Mapped[str] = mapped_column(String(255), nullable=False)
    description: Mapped[str | None] = mapped_column(String(255))
    steps: Mapped[list[dict[str, Any]]] = mapped_column(JSONType, nullable=False, default=list)
    traits: Mapped[list[str]] = mapped_column(JSONType, nullable=False, default=list)
    extra: Mapped[dict[str, Any]] = mapped_column(JSONType, nullable=False, default=dict)
    public: Mapped[bool] = mapped_column(Boolean, nullable=False, default=False)
    owner: Mapped[str | None] = mapped_column(String(255))
    disable_ramdisk: Mapped[bool] = mapped_column(Boolean, nullable=False, default=False)
    created_at: Mapped[dt.datetime] = mapped_column(UTCDateTime, nullable=False)
    updated_at: Mapped[dt.datetime | None] = mapped_column(UTCDateTime)
    etag: Mapped[str | None] = mapped_column(String(ETAG_LENGTH))


class ConductorRecord(Base):
    """One conductor host: written at start, its ``updated_at`` refreshed by each heartbeat."""

    __tablename__ = "conductors"
    __table_args__ = (UniqueConstraint("hostname", name="uniq_conductors0hostname"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    hostname: Mapped[str] = mapped_column(String(255), nullable=False)
    conductor_group: Mapped[str] = mapped_column(String(255), nullable=False, default="")
    drivers: Mapped[list[str]] = mapped_column(JSONType, nullable=False, default=list)
    online: Mapped[bool] = mapped_column(Boolean, nullable=False, default=True)
    created_at: Mapped[dt.datetime] = mapped_column(UTCDateTime, nullable=False)
    updated_at: Mapped[dt.datetime | None] = mapped_column(UTCDateTime)
