"""Schema of volume connectors, volume targets and inspection rules (migration 0005).

Same shapes as Ironic's tables (``volume_connectors``, ``volume_targets``,
``inspection_rules``), plus the ``etag`` column every resource here carries:

* a volume connector is unique per ``(type, connector_id)`` and a volume target per
  ``(node_id, boot_index)`` (Ironic's two 409s); both belong to a node and go with it
  (``ON DELETE CASCADE``: deleting a node deletes its volume connectors and targets,
  as Ironic does);
* an inspection rule's ``conditions`` and ``actions`` are JSON lists (JSONB on
  PostgreSQL).

The tables are declared on the shared :class:`~.models.Base`, so the metadata (and
the test comparing it with the migrated schema) knows them.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from sqlalchemy import Boolean, ForeignKey, Index, Integer, String, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from .models import ETAG_LENGTH, Base, JSONType, UTCDateTime

__all__ = ["InspectionRule", "VolumeConnector", "VolumeTarget"]


class VolumeConnector(Base):
    __tablename__ = "volume_connectors"
    __table_args__ = (
        UniqueConstraint("uuid", name="uniq_volume_connectors0uuid"),
        UniqueConstraint("type", "connector_id", name="uniq_volume_connectors0type0connector_id"),
        Index("volume_connectors_node_id_idx", "node_id"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    uuid: Mapped[str] = mapped_column(String(36), nullable=False)
    node_id: Mapped[int] = mapped_column(ForeignKey("nodes.id", ondelete="CASCADE"), nullable=False)
    type: Mapped[str] = mapped_column(String(32), nullable=False)
    connector_id: Mapped[str] = mapped_column(String(255), nullable=False)
    extra: Mapped[dict[str, Any]] = mapped_column(JSONType, nullable=False, default=dict)
    created_at: Mapped[dt.datetime] = mapped_column(UTCDateTime, nullable=False)
    updated_at: Mapped[dt.datetime | None] = mapped_column(UTCDateTime)
    etag: Mapped[str | None] = mapped_column(String(ETAG_LENGTH))


class VolumeTarget(Base):
    __tablename__ = "volume_targets"
    __table_args__ = (
        UniqueConstraint("uuid", name="uniq_volume_targets0uuid"),
        UniqueConstraint("boot_index", "node_id", name="uniq_volume_targets0boot_index0node_id"),
        Index("volume_targets_node_id_idx", "node_id"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    uuid: Mapped[str] = mapped_column(String(36), nullable=False)
    node_id: Mapped[int] = mapped_column(ForeignKey("nodes.id", ondelete="CASCADE"), nullable=False)
    volume_type: Mapped[str] = mapped_column(String(64), nullable=False)
    properties: Mapped[dict[str, Any]] = mapped_column(JSONType, nullable=False, default=dict)
    boot_index: Mapped[int] = mapped_column(Integer, nullable=False)
    volume_id: Mapped[str] = mapped_column(String(36), nullable=False)
    extra: Mapped[dict[str, Any]] = mapped_column(JSONType, nullable=False, default=dict)
    created_at: Mapped[dt.datetime] = mapped_column(UTCDateTime, nullable=False)
    updated_at: Mapped[dt.datetime | None] = mapped_column(UTCDateTime)
    etag: Mapped[str | None] = mapped_column(String(ETAG_LENGTH))


class InspectionRule(Base):
    __tablename__ = "inspection_rules"
    __table_args__ = (
        UniqueConstraint("uuid", name="uniq_inspection_rules0uuid"),
        Index("inspection_rules_phase_idx", "phase"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    uuid: Mapped[str] = mapped_column(String(36), nullable=False)
    priority: Mapped[int] = mapped_column(Integer, nullable=False, default=0)
    description: Mapped[str | None] = mapped_column(String(255))
    sensitive: Mapped[bool] = mapped_column(Boolean, nullable=False, default=False)
    phase: Mapped[str] = mapped_column(String(16), nullable=False, default="main")
    conditions: Mapped[list[Any]] = mapped_column(JSONType, nullable=False, default=list)
    actions: Mapped[list[Any]] = mapped_column(JSONType, nullable=False, default=list)
    created_at: Mapped[dt.datetime] = mapped_column(UTCDateTime, nullable=False)
    updated_at: Mapped[dt.datetime | None] = mapped_column(UTCDateTime)
    etag: Mapped[str | None] = mapped_column(String(ETAG_LENGTH))
