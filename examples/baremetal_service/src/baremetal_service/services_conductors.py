"""Conductors (``/v1/conductors``, Ironic 1.49): the conductor hosts, from their heartbeats.

This service runs its conductor in-process.  While its workers run, a heartbeat
thread upserts the host's row in ``conductors`` (hostname, conductor group, enabled
drivers) every *interval* seconds; on stop the row is marked offline.  A conductor
is ``alive`` while it is online and its last heartbeat is younger than *timeout*
(Ironic's ``[conductor]heartbeat_timeout`` rule), so a crashed process shows
``alive: false`` after *timeout* seconds.  Several processes on one host share the row.
"""

from __future__ import annotations

import datetime as dt
import logging
import threading
from collections.abc import Iterable
from typing import Any, Final

import sqlalchemy as sa

from . import exceptions as exc
from .db.api import Database, iso, utcnow
from .db.models_collections_a import ConductorRecord

__all__ = ["ConductorNotFound", "ConductorRegistry"]

LOG = logging.getLogger(__name__)
CONDUCTORS: Final = ConductorRecord.__table__
MAX_LIMIT: Final = 1000


class ConductorNotFound(exc.NotFound):
    error_code = "baremetal.conductor-not-found"

    def __init__(self, hostname: str) -> None:
        shown = hostname if len(hostname) <= 100 else hostname[:100] + "..."
        super().__init__(f"Conductor {shown} could not be found.")


class ConductorRegistry:
    def __init__(
        self,
        db: Database,
        hostname: str,
        drivers: Iterable[str],
        *,
        conductor_group: str = "",
        interval: float = 10.0,
        timeout: float = 60.0,
    ) -> None:
        self.db = db
        self.hostname = hostname
        self.drivers = sorted(drivers)
        self.conductor_group = conductor_group
        self.interval = interval
        self.timeout = timeout
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    # -- heartbeat ----------------------------------------------------------------------

    def heartbeat(self, *, online: bool = True) -> None:
        """Upsert this host's row (one statement; concurrent processes of a host agree)."""
        from sqlalchemy.dialects import postgresql, sqlite

        dialect = postgresql if self.db.engine.dialect.name == "postgresql" else sqlite
        now = utcnow()
        values = {
            "hostname": self.hostname, "conductor_group": self.conductor_group,
            "drivers": self.drivers, "online": online, "created_at": now, "updated_at": now,
        }  # fmt: skip
        stmt = dialect.insert(CONDUCTORS).values(**values)
        stmt = stmt.on_conflict_do_update(
            index_elements=["hostname"],
            set_={k: values[k] for k in ("conductor_group", "drivers", "online", "updated_at")},
        )
        with self.db.engine.begin() as conn:
            conn.execute(stmt)

    def start(self) -> None:
        if self._thread is not None:
            return
        self.heartbeat()
        self._stop.clear()
        self._thread = threading.Thread(target=self._loop, name="conductor-heartbeat", daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        while not self._stop.wait(self.interval):
            try:
                self.heartbeat()
            except Exception:  # the next beat may succeed
                LOG.exception("conductor heartbeat failed")

    def stop(self) -> None:
        if self._thread is None:
            return
        self._stop.set()
        self._thread.join(10)
        self._thread = None
        try:
            self.heartbeat(online=False)
        except Exception:
            LOG.exception("could not mark the conductor offline")

    # -- reads --------------------------------------------------------------------------

    def _doc(self, row: Any) -> dict[str, Any]:
        updated = row["updated_at"] or row["created_at"]
        fresh = utcnow() - updated < dt.timedelta(seconds=self.timeout)
        return {
            "hostname": row["hostname"],
            "conductor_group": row["conductor_group"],
            "drivers": list(row["drivers"] or []),
            "alive": bool(row["online"]) and fresh,
            "created_at": iso(row["created_at"]),
            "updated_at": iso(row["updated_at"]),
        }

    def get_conductor(self, hostname: str) -> dict[str, Any]:
        if "\x00" in hostname:
            raise ConductorNotFound(hostname)
        with self.db.reader.connect() as conn:
            row = (
                conn.execute(sa.select(CONDUCTORS).where(CONDUCTORS.c.hostname == hostname))
                .mappings()
                .first()
            )
        if row is None:
            raise ConductorNotFound(hostname)
        return self._doc(row)

    def list_conductors(
        self,
        *,
        limit: int | None = None,
        marker: str | None = None,
        sort_key: str = "id",
        sort_dir: str = "asc",
    ) -> list[dict[str, Any]]:
        col = CONDUCTORS.c[sort_key]
        order = (
            [col.asc(), CONDUCTORS.c.id.asc()] if sort_dir == "asc" else [col.desc(), CONDUCTORS.c.id.desc()]
        )
        stmt = sa.select(CONDUCTORS).order_by(*order).limit(min(limit or MAX_LIMIT, MAX_LIMIT))
        with self.db.reader.connect() as conn:
            if marker is not None:
                mrow = conn.execute(
                    sa.select(col, CONDUCTORS.c.id).where(CONDUCTORS.c.hostname == marker)
                ).first()
                if mrow is None:
                    raise ConductorNotFound(marker)
                value, row_id = mrow
                if sort_dir == "asc":
                    stmt = stmt.where(sa.or_(col > value, sa.and_(col == value, CONDUCTORS.c.id > row_id)))
                else:
                    stmt = stmt.where(sa.or_(col < value, sa.and_(col == value, CONDUCTORS.c.id < row_id)))
            rows = conn.execute(stmt).mappings().all()
        return [self._doc(r) for r in rows]
