"""The conductor: background workers that carry out queued provision and power actions.

The API side (``BaremetalService``) only *queues* work: in the same UPDATE that
moves a node into a transitional state (or sets ``target_power_state``) it sets
``pending_action``.  A worker then

1. lists nodes with queued work, no live lease and a driver this conductor has
   enabled (one indexed query; like Ironic's hash ring, a conductor never takes a
   node it has no driver for);
2. **claims** one with ``UPDATE nodes SET reservation=:me, reserved_at=now WHERE
   id=:id AND pending_action IS NOT NULL AND (reservation IS NULL OR lease
   expired)``: the database decides, so among any number of threads or processes
   exactly one worker gets the node;
3. runs the driver step(s), writing each state change through the service's one
   write path (etag recomputed, event recorded) with ``WHERE reservation=:me``;
4. clears ``pending_action`` and the lease in the same UPDATE as the final state,
   so the work cannot be picked up again.

While a worker carries out an action, a heartbeat renews its lease every
``lease_timeout / 3`` seconds, so a slow driver step keeps the node.  A worker that
dies mid-step leaves its lease behind; ``lease_timeout`` seconds after its last
heartbeat another worker may take the node over and redo the current step.  A
worker whose lease was taken over cannot write anything (``WHERE
reservation=:me`` fails): it drops the node.  Driver failures land in
``last_error`` and the machine's ``fail`` transition.
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import threading
import time
import uuid as uuidlib
from collections.abc import Callable, Iterator
from types import MappingProxyType
from typing import Any, Final

import baremetal_service.conductor.states as states
from apimw.errors import ConfigError
from baremetal_service.db.api import Database, iso, utcnow
from baremetal_service.drivers import (
    POWER_OFF,
    POWER_ON,
    REBOOT,
    SOFT_POWER_OFF,
    SOFT_REBOOT,
    DriverRegistry,
    HardwareType,
    Task,
)

__all__ = ["Conductor", "LeaseLost", "PENDING_POWER", "PENDING_PROVISION"]

LOG = logging.getLogger(__name__)
PENDING_PROVISION: Final = "provision:"
PENDING_POWER: Final = "power:"

#: last_error texts (Ironic's wording where it has one).
_FAILURE_TEXT: Final = {
    "verify": "Failed to get power state for node {uuid}. Error: {error}",
    "inspect": "Failed to inspect hardware. Reason: {error}",
    "deploy": "Failed to deploy. Error: {error}",
    "tear_down": "Failed to tear down. Error: {error}",
    "clean": "Failed to clean node {uuid}. Error: {error}",
}


class LeaseLost(Exception):
    """Another worker took over the node (our lease expired): stop touching it."""


class Conductor:
    """Worker threads that carry out queued node actions; safe across processes.

    ``run_once()`` processes what is queued now, in the calling thread (tests use
    it; so can a cron-style deployment).  ``start()`` runs *workers* threads that
    poll every *poll_interval* seconds and wake at once on :meth:`wake`.
    """

    def __init__(
        self,
        db: Database,
        drivers: DriverRegistry,
        *,
        name: str | None = None,
        workers: int = 1,
        poll_interval: float = 0.2,
        lease_timeout: float = 120.0,
        step_timeout: float = 60.0,
    ) -> None:
        if workers < 1 or poll_interval <= 0 or lease_timeout <= 0 or step_timeout <= 0:
            raise ConfigError(
                "conductor workers must be >= 1 and poll_interval, lease_timeout, step_timeout > 0"
            )
        self.db = db
        self.drivers = drivers
        self.host = socket.gethostname()
        self.name = name or f"{self.host}:{os.getpid()}:{uuidlib.uuid4().hex[:8]}"
        self.workers = workers
        self.poll_interval = poll_interval
        self.lease_timeout = lease_timeout
        self.step_timeout = step_timeout
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []

    # -- lifecycle --------------------------------------------------------------

    def start(self) -> None:
        if self._threads:
            return
        self._stop.clear()
        for i in range(self.workers):
            thread = threading.Thread(
                target=self._loop, args=(f"{self.name}/{i}",), name=f"conductor-{i}", daemon=True
            )
            thread.start()
            self._threads.append(thread)

    def stop(self, timeout: float = 10.0) -> None:
        self._stop.set()
        self._wake.set()
        for thread in self._threads:
            thread.join(timeout)
        self._threads = []

    def wake(self) -> None:
        """Work was queued: look now instead of at the next poll."""
        self._wake.set()

    def _loop(self, worker: str) -> None:
        while not self._stop.is_set():
            try:
                done = self.run_once(worker)
            except Exception:  # a database hiccup must not kill the worker
                LOG.exception("conductor worker %s: iteration failed", worker)
                done = 0
            if done == 0:
                self._wake.wait(self.poll_interval)
                self._wake.clear()

    # -- one pass ---------------------------------------------------------------

    def run_once(self, worker: str | None = None) -> int:
        """Claim and carry out every node with queued work; returns how many this call did."""
        worker = worker or self.name
        done = 0
        drivers = self.drivers.names()
        for node_id, _uuid in self.db.pending_nodes(lease_timeout=self.lease_timeout, drivers=drivers):
            if self._stop.is_set():
                break
            if not self.db.claim_node(node_id, worker, lease_timeout=self.lease_timeout, drivers=drivers):
                continue  # another worker has it
            try:
                self.process(node_id, worker)
                done += 1
            except LeaseLost:
                LOG.warning("worker %s lost the lease of node %s", worker, _uuid)
            except Exception:
                LOG.exception("worker %s: node %s failed unexpectedly", worker, _uuid)
                self.db.release_lease(node_id, worker)
        return done

    def process(self, node_id: int, worker: str) -> None:
        """Carry out the queued action of a node this worker has claimed."""
        doc = self.db.get_by_id("node", node_id)
        if doc is None or doc["reservation"] != worker:
            raise LeaseLost(str(node_id))
        pending = doc["pending_action"] or ""
        with self._heartbeat(node_id, worker):
            if pending.startswith(PENDING_POWER):
                self._power(doc, worker, pending[len(PENDING_POWER) :])
            elif pending.startswith(PENDING_PROVISION):
                self._provision(doc, worker, pending[len(PENDING_PROVISION) :])
            else:
                self._write(doc, worker, {}, finished=True)

    @contextlib.contextmanager
    def _heartbeat(self, node_id: int, worker: str) -> Iterator[None]:
        """Renew the lease every ``lease_timeout / 3`` seconds while a (slow) step runs, so
        the lease only expires when this worker is really gone."""
        stop = threading.Event()

        def beat() -> None:
            while not stop.wait(self.lease_timeout / 3):
                try:
                    if not self.db.renew_lease(node_id, worker):
                        return  # taken over or finished
                except Exception:  # the next beat may succeed; the lease has slack
                    LOG.exception("worker %s: renewing the lease of node %s failed", worker, node_id)

        thread = threading.Thread(target=beat, name=f"lease-{node_id}", daemon=True)
        thread.start()
        try:
            yield
        finally:
            stop.set()
            thread.join(5)

    # -- writing ----------------------------------------------------------------

    def _write(
        self, doc: dict[str, Any], worker: str, changes: dict[str, Any], *, finished: bool
    ) -> dict[str, Any]:
        changes = dict(changes)
        if finished:
            changes.update(pending_action=None, reservation=None, reserved_at=None)
        else:
            changes["reserved_at"] = utcnow()

        def check(current: dict[str, Any]) -> None:
            if current["reservation"] != worker:
                raise LeaseLost(str(current["uuid"]))

        def mutate(current: dict[str, Any]) -> dict[str, Any]:
            check(current)
            return changes

        return self.db.update(
            "node",
            doc["uuid"],
            mutate,
            event_type="baremetal.node.conductor.end" if finished else "baremetal.node.conductor.step",
            match={"reservation": worker},
            on_conflict=check,
        )

    def _task(self, doc: dict[str, Any]) -> Task:
        return Task(
            node=MappingProxyType(doc),
            driver_internal_info=dict(doc.get("driver_internal_info") or {}),
            deadline=time.monotonic() + self.step_timeout,
        )

    # -- power ------------------------------------------------------------------

    def _power(self, doc: dict[str, Any], worker: str, target: str) -> None:
        task = self._task(doc)
        timeout = task.driver_internal_info.pop("power_timeout", None)
        changes: dict[str, Any] = {"target_power_state": None}
        try:
            hw = self.drivers.for_node(doc["driver"])
            if target in (REBOOT, SOFT_REBOOT):
                hw.power.reboot(task, timeout)
                new_state = POWER_ON
            else:
                hw.power.set_power_state(task, target, timeout)
                new_state = POWER_OFF if target in (POWER_OFF, SOFT_POWER_OFF) else POWER_ON
            changes.update(power_state=new_state, last_error=None)
        except Exception as error:  # driver failures of any kind are the node's last_error
            changes["last_error"] = (
                f"Failed to change power state to '{target}' by '{target}'. Error: {_text(error)}"
            )
        changes["driver_internal_info"] = task.driver_internal_info
        self._write(doc, worker, changes, finished=True)

    # -- provisioning -----------------------------------------------------------

    def _provision(self, doc: dict[str, Any], worker: str, action: str) -> None:
        while True:
            state = doc["provision_state"]
            if states.is_stable(state):
                self._write(doc, worker, {"target_provision_state": None}, finished=True)
                return
            step = states.STEPS[state]
            task = self._task(doc)
            error: str | None = None
            changes: dict[str, Any] = {}
            try:
                hw = self.drivers.for_node(doc["driver"])
                changes = self._run_step(step.name, hw, task, doc, action)
                event = states.done_event(state, action)
            except Exception as exc:  # driver failures of any kind land in last_error
                error = (
                    str(exc)
                    if getattr(exc, "verbatim", False)
                    else _FAILURE_TEXT[step.name].format(uuid=doc["uuid"], error=_text(exc))
                )
                event = "fail"
            new_state = states.next_state(state, event)
            if new_state is None:  # pragma: no cover - the machine defines fail for each step
                raise RuntimeError(f"no {event!r} transition from {state!r}")
            now = utcnow()
            changes.update(
                provision_state=new_state,
                provision_updated_at=now,
                driver_internal_info=task.driver_internal_info,
            )
            if error is not None:
                changes["last_error"] = error
            stable = states.is_stable(new_state)
            changes["target_provision_state"] = None if stable else doc["target_provision_state"]
            if stable:
                changes["driver_internal_info"].pop("clean_steps", None)
            doc = self._write(doc, worker, changes, finished=stable)
            if stable:
                return

    def _run_step(
        self, name: str, hw: HardwareType, task: Task, doc: dict[str, Any], action: str
    ) -> dict[str, Any]:
        """Run one driver step; returns the node changes it implies."""
        if name == "verify":
            hw.validate_driver_info(task)
            hw.power.validate(task)
            hw.management.validate(task)
            return {"power_state": hw.power.get_power_state(task), "last_error": None}
        if name == "inspect":
            hw.inspect.validate(task)
            found = hw.inspect.inspect(task)
            return {
                "properties": {**(doc.get("properties") or {}), **found},
                "inspection_finished_at": iso(utcnow()),
                "last_error": None,
            }
        if name == "deploy":
            hw.validate_driver_info(task)
            hw.deploy.validate(task)
            hw.management.set_boot_device(task, "pxe")
            hw.deploy.deploy(task)
            hw.power.set_power_state(task, POWER_ON, None)
            return {"power_state": POWER_ON, "last_error": None}
        if name == "tear_down":
            hw.deploy.tear_down(task)
            hw.power.set_power_state(task, POWER_OFF, None)
            return {"power_state": POWER_OFF, "instance_info": {}, "instance_uuid": None}
        if name == "clean":
            if action == "clean":
                steps = list(task.driver_internal_info.get("clean_steps") or [])
                hw.check_clean_steps(task, steps)
                hw.deploy.clean(task, steps)
            elif doc.get("automated_clean") is not False:
                hw.deploy.clean(task, None)
            return {"last_error": None}
        raise RuntimeError(f"unknown step {name!r}")  # pragma: no cover


def _text(error: BaseException) -> str:
    return str(error) or type(error).__name__


#: For tests and tools: a callable that runs a conductor pass until nothing is queued.
def drain(conductor: Conductor, *, timeout: float = 10.0, until: Callable[[], bool] | None = None) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        conductor.run_once()
        if until is None:
            pending = conductor.db.pending_nodes(
                lease_timeout=conductor.lease_timeout, drivers=conductor.drivers.names()
            )
            if not pending:
                return
        elif until():
            return
        time.sleep(0.01)
    raise TimeoutError("conductor work did not finish in time")
