"""Node history: Ironic's ``node_history`` records (microversion 1.78).

Ironic's conductor calls ``node_history_record(node, event=error, error=True)`` wherever
a failure sets the node's ``last_error``: an ERROR entry with the text, the activity
(``event_type``: ``cleaning``, ``deploying``...), the conductor's host, the requesting
user and project, and the state the node was in.  Here the one place every node write
goes through (:meth:`.api.Database.update`) calls :func:`record` in the write's own
transaction whenever the write sets ``last_error`` to a new text, so a failure and its
history entry are committed together, whichever code path failed.
"""

from __future__ import annotations

import builtins
import datetime as dt
import socket
import uuid as uuidlib
from collections.abc import Mapping
from typing import Any, Final, cast

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from baremetal_service import exceptions as exc
from baremetal_service.db.models import NodeHistory

__all__ = ["HISTORY", "NodeHistoryNotFound", "get", "list_for_node", "record"]

HISTORY: Final = cast(sa.Table, NodeHistory.__table__)
_INSERT: Final = HISTORY.insert()
_HOST: Final = socket.gethostname()

#: Ironic's event types (ironic/common/states.py) by the provision state a failure hit.
_EVENT_TYPES: Final[Mapping[str, str]] = {
    "verifying": "verifying",
    "inspecting": "introspection",
    "inspect wait": "introspection",
    "deploying": "deploying",
    "wait call-back": "deploying",
    "deleting": "unprovision",
    "cleaning": "cleaning",
    "clean wait": "cleaning",
    "rescuing": "rescue",
    "unrescuing": "rescue",
    "servicing": "servicing",
    "adopting": "adoption",
}
#: Fields and the order Ironic shows them in (NodeHistoryController.detail_fields).
FIELDS: Final = (
    "uuid", "created_at", "severity", "event_type", "event", "conductor", "user", "project",
    "state", "target_provision_state", "duration_seconds",
)  # fmt: skip


class NodeHistoryNotFound(exc.NotFound):
    error_code = "baremetal.node-history-not-found"

    def __init__(self, ident: str) -> None:
        super().__init__(f"Node history record {ident[:255]} could not be found.")


def _parse(value: Any) -> dt.datetime | None:
    if isinstance(value, dt.datetime):
        return value.replace(tzinfo=None)
    if isinstance(value, str):
        try:
            return dt.datetime.fromisoformat(value).astimezone(dt.UTC).replace(tzinfo=None)
        except ValueError:
            return None
    return None


def record(
    conn: Connection, current: Mapping[str, Any], changes: Mapping[str, Any], now: dt.datetime
) -> None:
    """Record an ERROR entry if *changes* give the node a new ``last_error``.

    *current* is the node before the write: its states are those of the failure (Ironic
    records the entry before the node moves to the failed state)."""
    error = changes.get("last_error")
    if not error or error == current.get("last_error"):
        return
    state = current.get("provision_state")
    since = _parse(current.get("provision_updated_at"))
    conn.execute(
        _INSERT,
        {
            "uuid": str(uuidlib.uuid4()),
            "node_id": current["id"],
            "created_at": now,
            "severity": "ERROR",
            "event_type": _EVENT_TYPES.get(str(state), "UNKNOWN"),
            "event": str(error),
            "conductor": _HOST,
            "user": None,
            "project": None,
            "state": state,
            "target_provision_state": current.get("target_provision_state"),
            "duration_seconds": None if since is None else max(0, int((now - since).total_seconds())),
        },
    )


def _doc(row: Mapping[str, Any]) -> dict[str, Any]:
    doc = {key: row[key] for key in FIELDS}
    doc["created_at"] = row["created_at"].isoformat() + "+00:00"
    return doc


def list_for_node(
    conn: Connection,
    node_id: int,
    *,
    limit: int,
    marker: str | None = None,
    sort_key: str = "created_at",
    sort_dir: str = "asc",
) -> builtins.list[dict[str, Any]]:
    """A node's entries sorted by *sort_key* (one of :data:`FIELDS`; ties in creation
    order) in *sort_dir*, after *marker* (an entry uuid)."""
    column, row_id = HISTORY.c[sort_key], HISTORY.c.id
    key = sa.tuple_(column, row_id)
    stmt = sa.select(HISTORY).where(HISTORY.c.node_id == node_id)
    if marker is not None:
        pivot = conn.execute(
            sa.select(column, row_id).where(HISTORY.c.uuid == marker, HISTORY.c.node_id == node_id)
        ).first()
        if pivot is None:
            raise NodeHistoryNotFound(marker)
        after = sa.tuple_(sa.literal(pivot[0], column.type), sa.literal(pivot[1]))
        stmt = stmt.where(key > after if sort_dir == "asc" else key < after)
    if sort_dir == "asc":
        stmt = stmt.order_by(column.asc(), row_id.asc())
    else:
        stmt = stmt.order_by(column.desc(), row_id.desc())
    rows = conn.execute(stmt.limit(limit)).mappings().all()
    return [_doc(r) for r in rows]


def get(conn: Connection, node_id: int, ident: str) -> dict[str, Any]:
    """One entry of the node by uuid; NodeHistoryNotFound otherwise (or of another node)."""
    row = None
    if len(ident) == 36:
        row = conn.execute(
            sa.select(HISTORY).where(HISTORY.c.uuid == ident.lower(), HISTORY.c.node_id == node_id)
        ).mappings().first()
    if row is None:
        raise NodeHistoryNotFound(ident)
    return _doc(row)
