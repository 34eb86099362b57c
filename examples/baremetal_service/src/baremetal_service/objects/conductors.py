"""Conductors (``/v1/conductors``, Ironic 1.49): read-only, keyed by hostname.

Served by :mod:`baremetal_service.handlers.conductors` from the heartbeat table; the
declaration (:data:`CONDUCTORS`) describes the fields, :class:`ConductorRegistry` the
heartbeats.

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

from baremetal_service import exceptions as exc
from baremetal_service import versions
from baremetal_service.db.api import Database, iso, utcnow
from baremetal_service.objects.resource import Resource
from baremetal_service.versions import FIRST, Fields

__all__ = ['ConductorNotFound', 'ConductorRegistry']

CONDUCTORS: Final = Resource(
    kind="conductor",
    fields=Fields(dict.fromkeys(
        ("hostname", "conductor_group", "alive", "drivers", "created_at", "updated_at", "links"), FIRST
    )),
    list_fields=("hostname", "conductor_group", "alive"),
    create_schema={},
    patchable=(),
    sort_keys=("hostname", "conductor_group", "created_at", "updated_at"),
    since=versions.CONDUCTORS,
    read_only=True,
    own_controller=True,
    routes=False,
)
DECLARED: Final = (CONDUCTORS,)


LOG = logging.getLogger(__name__)


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
        self.db.conductor_heartbeat(
            self.hostname, conductor_group=self.conductor_group, drivers=self.drivers, online=online
        )

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
        row = self.db.get_conductor(hostname)
        if row is None:
            raise ConductorNotFound(hostname)
        return self._doc(row)

    def list_conductors(self, **page: Any) -> list[dict[str, Any]]:
        """A page of conductors as shown; *page*: the paging arguments of
        :meth:`Database.list_conductors` (``limit``, ``marker``, ``sort_key``, ``sort_dir``)."""
        return [self._doc(r) for r in self.db.list_conductors(**page, not_found=ConductorNotFound)]
