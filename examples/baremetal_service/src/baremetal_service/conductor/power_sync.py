"""Power state sync: a periodic conductor task that records out-of-band power changes.

Somebody presses the power button, or uses the BMC's web page: the hardware's
power state no longer matches the node's ``power_state``.  Like Ironic's
``_sync_power_states`` (with ``force_power_state_during_sync = False``), every
*interval* seconds :class:`PowerSync` asks each eligible node's driver for the
actual power state and, when it differs, records it on the node (through the
data API's one write path: a new etag, and an event
``baremetal.node.power_state_corrected.success`` carrying the old and new state).

A node is eligible when it is idle: not in maintenance, no conductor lease, no
queued action, no ``target_power_state``, and in a stable provision state other
than ``enroll`` (its credentials are not verified yet).  The write is a
compare-and-swap: ``UPDATE ... WHERE reservation IS NULL AND pending_action IS
NULL AND power_state = <the state we replaced>`` -- so a power action queued (or a
worker that claimed the node) between our read of the BMC and our write wins,
and the sync never overwrites it.

The driver calls are bounded by the driver's own timeouts (the redfish driver:
connect and read timeouts); a failure to read a node's power state is logged
(without driver_info) and reported in the result, and the node is left as it is.

Use :func:`sync_power_states` for one pass (tests, cron) or :class:`PowerSync`
(``start()`` / ``stop()``) next to the :class:`~baremetal_service.conductor.Conductor`.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Final

import baremetal_service.conductor.states as states
from baremetal_service import exceptions as exc
from baremetal_service.conductor.periodic import PeriodicTask
from baremetal_service.db.api import Database
from baremetal_service.drivers import DriverRegistry, Task

__all__ = ["EVENT_TYPE", "PowerSync", "SyncResult", "sync_power_states"]

LOG = logging.getLogger(__name__)
EVENT_TYPE: Final = "baremetal.node.power_state_corrected.success"
#: Bound of one driver call in a sync pass (the driver's own timeouts are shorter).
STEP_TIMEOUT: Final = 30.0


@dataclass(frozen=True)
class SyncResult:
    """What one pass found for one node."""

    uuid: str
    old: str | None
    new: str | None
    error: str | None = None

    @property
    def changed(self) -> bool:
        return self.error is None and self.old != self.new


class _Skip(Exception):
    """The node stopped being idle between our read and our write: leave it alone."""


def _idle(doc: dict[str, Any]) -> bool:
    state = doc.get("provision_state")
    return (
        not doc.get("maintenance")
        and doc.get("reservation") is None
        and doc.get("pending_action") is None
        and doc.get("target_power_state") is None
        and state != states.ENROLL
        and states.is_stable(str(state))
    )


def _check_one(db: Database, drivers: DriverRegistry, doc: dict[str, Any]) -> SyncResult | None:
    uuid = str(doc["uuid"])
    old = doc.get("power_state")
    try:
        hw = drivers.for_node(str(doc["driver"]))
    except exc.NoValidHost:
        return None  # a driver this service does not enable: not ours to sync
    task = Task(node=doc, deadline=time.monotonic() + STEP_TIMEOUT)
    try:
        actual = hw.power.get_power_state(task)
    except Exception as error:  # any driver failure: report it, change nothing
        text = str(error) or type(error).__name__
        LOG.warning("power sync: cannot read the power state of node %s: %s", uuid, text)
        return SyncResult(uuid, old, None, error=text)
    if actual == old:
        return SyncResult(uuid, old, actual)

    def mutate(current: dict[str, Any]) -> dict[str, Any]:
        if not _idle(current) or current.get("power_state") != old:
            raise _Skip
        return {"power_state": actual}

    def on_conflict(current: dict[str, Any]) -> None:
        if not _idle(current) or current.get("power_state") != old:
            raise _Skip

    try:
        db.update(
            "node",
            uuid,
            mutate,
            event_type=EVENT_TYPE,
            # idle and still in the state read (None matches IS NULL), decided by the UPDATE
            match={
                "reservation": None,
                "pending_action": None,
                "target_power_state": None,
                "power_state": old,
            },
            on_conflict=on_conflict,
        )
    except (_Skip, exc.NodeNotFound):
        return None
    LOG.info("power sync: node %s power state changed out of band: %r -> %r", uuid, old, actual)
    return SyncResult(uuid, old, actual)


def sync_power_states(
    db: Database, drivers: DriverRegistry, *, workers: int = 4, page_size: int = 500
) -> list[SyncResult]:
    """One pass over the idle nodes; returns a result per node checked (changes and errors)."""
    results: list[SyncResult] = []
    last_id = 0  # keyset paging on the primary key: robust to nodes deleted meanwhile
    with ThreadPoolExecutor(max_workers=max(1, workers), thread_name_prefix="power-sync") as pool:
        while True:
            page = db.idle_nodes_page(after_id=last_id, limit=page_size)
            eligible = [doc for doc in page if _idle(doc)]
            found = pool.map(lambda doc: _check_one(db, drivers, doc), eligible)
            results.extend(result for result in found if result is not None)
            if len(page) < page_size:
                return results
            last_id = int(page[-1]["id"])


class PowerSync(PeriodicTask):
    """Run :func:`sync_power_states` every *interval* seconds in a daemon thread."""

    name = "power-sync"

    def __init__(
        self, db: Database, drivers: DriverRegistry, *, interval: float = 60.0, workers: int = 4
    ) -> None:
        super().__init__(interval=interval)
        self.db = db
        self.drivers = drivers
        self.workers = workers
        self.passes = 0
        self.last_results: Sequence[SyncResult] = ()

    def run_once(self) -> list[SyncResult]:
        results = sync_power_states(self.db, self.drivers, workers=self.workers)
        self.last_results = results
        self.passes += 1
        return results
