"""Conductor leases on nodes: which nodes have queued work, and who holds each.

A node with work queued (``pending_action``) is taken by one conductor worker at a time:
:meth:`LeaseQueries.claim_node` is one UPDATE that decides (``reservation`` empty or its
lease stale), :meth:`~LeaseQueries.renew_lease` keeps it, :meth:`~LeaseQueries.release_lease`
drops it without finishing the work.  Part of :class:`.api.Database` (a mixin).
"""

from __future__ import annotations

import builtins
import datetime as dt
from collections.abc import Iterable
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Engine

from baremetal_service.db.kinds import NODES, utcnow

__all__ = ["LeaseQueries"]


class LeaseQueries:
    """The conductor's node leases."""

    engine: Engine
    reader: Engine

    def pending_nodes(
        self, *, lease_timeout: float, limit: int = 32, drivers: Iterable[str] | None = None
    ) -> builtins.list[tuple[int, str]]:
        """``(id, uuid)`` of nodes with queued work and no live lease, oldest first.

        *drivers* restricts them to nodes of those hardware types (a conductor only
        takes nodes whose driver it has enabled, as Ironic's hash ring does).
        """
        stmt = (
            sa.select(NODES.c.id, NODES.c.uuid)
            .where(*_takeable(utcnow(), lease_timeout, drivers))
            .order_by(NODES.c.provision_updated_at.asc().nulls_first(), NODES.c.id)
            .limit(limit)
        )
        with self.reader.connect() as conn:
            return [(int(r[0]), str(r[1])) for r in conn.execute(stmt)]

    def claim_node(
        self, node_id: int, worker: str, *, lease_timeout: float, drivers: Iterable[str] | None = None
    ) -> bool:
        """Atomically take the lease of a node with queued work: one UPDATE decides."""
        now = utcnow()
        conditions = [NODES.c.id == node_id, *_takeable(now, lease_timeout, drivers)]
        stmt = NODES.update().where(*conditions).values(reservation=worker, reserved_at=now)
        with self.engine.begin() as conn:
            return conn.execute(stmt).rowcount == 1

    def renew_lease(self, node_id: int, worker: str) -> bool:
        return self._write_held(node_id, worker, reserved_at=utcnow())

    def release_lease(self, node_id: int, worker: str) -> None:
        """Drop a lease without finishing the work (it stays queued for another worker)."""
        self._write_held(node_id, worker, reservation=None, reserved_at=None)

    def _write_held(self, node_id: int, worker: str, **values: Any) -> bool:
        """Set *values* on the node while *worker* holds its lease; whether it still did."""
        stmt = NODES.update().where(NODES.c.id == node_id, NODES.c.reservation == worker).values(**values)
        with self.engine.begin() as conn:
            return conn.execute(stmt).rowcount == 1


def _takeable(
    now: dt.datetime, lease_timeout: float, drivers: Iterable[str] | None
) -> builtins.list[sa.ColumnElement[bool]]:
    """The conditions of a node a worker may take: work queued, no lease younger than
    *lease_timeout* seconds, and (with *drivers*) one of those hardware types."""
    stale = now - dt.timedelta(seconds=lease_timeout)
    conditions = [
        NODES.c.pending_action.is_not(None),
        sa.or_(NODES.c.reservation.is_(None), NODES.c.reserved_at < stale),
    ]
    if drivers is not None:
        conditions.append(NODES.c.driver.in_(list(drivers)))
    return conditions
