"""Schema of node history (migration 0007): Ironic's ``node_history`` table.

One row per event Ironic's ``node_history_record`` would write: here, every write that
sets a node's ``last_error`` to a new text (severity ERROR), recorded in the same
transaction as that write (see :meth:`.api.Database.update`).  ``state`` and
``target_provision_state`` are the node's states when the failure happened (before the
failing write moved it on), as Ironic records them.  Rows go with their node
(``ON DELETE CASCADE``).
"""

from __future__ import annotations

import datetime as dt

from sqlalchemy import ForeignKey, Index, Integer, String, Text, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from .models import Base, UTCDateTime

__all__ = ["NodeHistory"]


class NodeHistory(Base):
    __tablename__ = "node_history"
    __table_args__ = (
        UniqueConstraint("uuid", name="uniq_node_history0uuid"),
        Index("node_history_node_id_idx", "node_id"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
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
