"""Event records: one row per create, update, delete or state change, carrying the etag.

:func:`record` writes a write's event in that write's transaction (so a change and its
notification are committed together); :class:`EventQueries` reads them back (a part of
:class:`.api.Database`).  Payloads never carry the internal keys, nor the fields that may
hold secrets (``driver_info``, ``instance_info``, an inspection rule's conditions...).
"""

from __future__ import annotations

import builtins
import datetime as dt
from collections.abc import Mapping
from typing import Any, Final

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine

from baremetal_service.db.kinds import EVENTS, INTERNAL_KEYS, iso

__all__ = ["EventQueries", "record"]

_INSERT: Final = EVENTS.insert()
#: Keys never copied into event payloads (secrets may live there).
#: (an inspection rule's conditions and actions may hold secrets: its ``sensitive`` flag)
_PAYLOAD_EXCLUDED: Final = INTERNAL_KEYS | {
    "driver_info", "driver_internal_info", "instance_info", "conditions", "actions",
}  # fmt: skip


def record(
    conn: Connection,
    kind: str,
    doc: Mapping[str, Any],
    event_type: str,
    etag: str | None,
    now: dt.datetime,
) -> None:
    """The event record of a write of *doc* (a *kind*), in the write's transaction *conn*."""
    values = {
        "event_type": event_type,
        "resource_type": kind,
        "resource_uuid": doc["uuid"],
        "payload": {k: v for k, v in doc.items() if k not in _PAYLOAD_EXCLUDED},
        "created_at": now,
        "etag": etag,
    }
    conn.execute(_INSERT, values)


class EventQueries:
    """Reading the event records back."""

    reader: Engine

    def list_events(
        self, *, resource_uuid: str | None = None, limit: int = 100
    ) -> builtins.list[dict[str, Any]]:
        """The last *limit* events (of *resource_uuid*'s if given), oldest first."""
        stmt = sa.select(EVENTS).order_by(EVENTS.c.id.desc()).limit(limit)
        if resource_uuid is not None:
            stmt = stmt.where(EVENTS.c.resource_uuid == resource_uuid)
        with self.reader.connect() as conn:
            rows = conn.execute(stmt).mappings().all()
        return [
            {"id": r["id"], "event_type": r["event_type"], "resource_type": r["resource_type"],
             "resource_uuid": r["resource_uuid"], "payload": r["payload"],
             "created_at": iso(r["created_at"]), "etag": r["etag"]}
            for r in reversed(rows)
        ]  # fmt: skip
