"""The conductor: the automaton state machine, driver steps, failures, leases, races."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any, ClassVar

import pytest
from automaton import machines
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from apimw.errors import ConfigError
from baremetal_service import exceptions as exc
from baremetal_service.conductor import Conductor, LeaseLost, drain, states
from baremetal_service.db.api import Database
from baremetal_service.drivers import (
    POWER_OFF,
    POWER_ON,
    DriverError,
    DriverRegistry,
    DriverValidationError,
    FakeHardware,
    Task,
)
from baremetal_service.objects.service import BaremetalService

REPO = Path(__file__).resolve().parents[3]


class Recorder(FakeHardware):
    """fake-hardware that records every driver call and fails the steps it is told to."""

    name: ClassVar[str] = "recorder"
    driver_info_properties: ClassVar[dict[str, str]] = {
        "address": "Required. The BMC address.",
        "password": "The BMC password.",
    }
    secret_fields: ClassVar[frozenset[str]] = frozenset({"password"})

    def __init__(self, *, fail: tuple[str, ...] = (), delay: float = 0.0) -> None:
        super().__init__()
        self.calls: list[tuple[str, str]] = []
        self.lock = threading.Lock()
        self.fail = set(fail)
        self.delay = delay
        hw = self

        def wrap(name: str, func: Any) -> Any:
            def call(task: Task, *args: Any) -> Any:
                with hw.lock:
                    hw.calls.append((name, task.uuid))
                if hw.delay:
                    time.sleep(hw.delay)
                if name in hw.fail:
                    raise DriverError(f"{name} exploded")
                return func(task, *args)

            return call

        self.deploy.deploy = wrap("deploy", self.deploy.deploy)  # type: ignore[method-assign]
        self.deploy.tear_down = wrap("tear_down", self.deploy.tear_down)  # type: ignore[method-assign]
        self.deploy.clean = wrap("clean", self.deploy.clean)  # type: ignore[method-assign]
        self.inspect.inspect = wrap("inspect", lambda task: {"cpus": 8, "memory_mb": 4096})  # type: ignore[method-assign]
        self.power.set_power_state = wrap("power", self.power.set_power_state)  # type: ignore[method-assign]
        self.power.validate = wrap("power_validate", lambda task: None)  # type: ignore[method-assign]

    def count(self, name: str, uuid: str | None = None) -> int:
        return sum(1 for n, u in self.calls if n == name and (uuid is None or u == uuid))


def make_service(database_url: str, hw: Recorder, **kw: Any) -> BaremetalService:
    kw.setdefault("conductor_workers", 0)  # drive the conductor by hand: deterministic
    return BaremetalService(
        database_url,
        etag_key=b"x" * 32,
        enabled_hardware_types=("fake-hardware", "recorder"),
        extra_hardware_types=(hw,),
        **kw,
    )


@pytest.fixture
def recorder() -> Recorder:
    return Recorder()


@pytest.fixture
def svc(database_url: str, recorder: Recorder) -> Any:
    service = make_service(database_url, recorder)
    yield service
    service.close()


def run(svc: BaremetalService, ident: str) -> dict[str, Any]:
    drain(svc.conductor)
    return svc.get_node(ident)


def enrolled(svc: BaremetalService, name: str = "n", **values: Any) -> dict[str, Any]:
    values.setdefault("driver_info", {"address": "10.0.0.1", "password": "pw"})
    return svc.create_node({"name": name, "driver": "recorder", **values})


def to_available(svc: BaremetalService, name: str) -> None:
    svc.set_provision_state(name, "manage")
    assert run(svc, name)["provision_state"] == "manageable"
    svc.set_provision_state(name, "provide")
    assert run(svc, name)["provision_state"] == "available"


# -- the machine ---------------------------------------------------------------------------


def test_the_machine_is_an_automaton_finite_machine_with_a_way_out_of_every_step() -> None:
    assert isinstance(states.MACHINE, machines.FiniteMachine)
    for state in states.STEPS:
        assert states.next_state(state, "fail") is not None, state
        assert states.is_stable(states.next_state(state, "fail") or "")


@pytest.mark.parametrize(
    ("state", "allowed"),
    [
        pytest.param("enroll", ["manage"], id="enroll"),
        pytest.param("manageable", ["clean", "inspect", "provide"], id="manageable"),
        pytest.param("available", ["active", "manage"], id="available"),
        pytest.param("active", ["deleted", "rebuild"], id="active"),
        pytest.param("deploy failed", ["active", "deleted", "rebuild"], id="deploy-failed"),
        pytest.param("clean failed", ["manage"], id="clean-failed"),
        pytest.param("inspect failed", ["inspect", "manage"], id="inspect-failed"),
        pytest.param("error", ["deleted", "rebuild"], id="error"),
        pytest.param("deploying", [], id="deploying"),
    ],
)
def test_allowed_actions_come_from_the_machine(state: str, allowed: list[str]) -> None:
    assert states.allowed_actions(state) == allowed


@pytest.mark.parametrize(
    ("state", "action", "target"),
    [
        pytest.param("verifying", "manage", "manageable", id="verify"),
        pytest.param("cleaning", "provide", "available", id="automated-clean"),
        pytest.param("cleaning", "clean", "manageable", id="manual-clean"),
        pytest.param("deleting", "deleted", "available", id="undeploy"),
        pytest.param("deploying", "active", "active", id="deploy"),
        pytest.param("manageable", "manage", None, id="already-stable"),
    ],
)
def test_target_states_are_derived_from_the_machine(state: str, action: str, target: str | None) -> None:
    assert states.target_of(state, action) == target


# -- the lifecycle through the driver ------------------------------------------------------


def test_full_lifecycle_calls_each_driver_step_once(svc: BaremetalService, recorder: Recorder) -> None:
    n = enrolled(svc)
    queued = svc.set_provision_state("n", "manage")
    assert (queued["provision_state"], queued["target_provision_state"]) == ("verifying", "manageable")
    done = run(svc, "n")
    assert (done["provision_state"], done["target_provision_state"], done["reservation"]) == (
        "manageable", None, None,
    )  # fmt: skip
    svc.set_provision_state("n", "inspect")
    inspected = run(svc, "n")
    assert inspected["properties"] == {"cpus": 8, "memory_mb": 4096}
    assert inspected["inspection_finished_at"] is not None
    svc.set_provision_state("n", "provide")
    assert run(svc, "n")["provision_state"] == "available"
    svc.update_node("n", {"instance_uuid": "5c9d8d6e-6a62-4d4e-9b67-2f4a8e0c1d11", "instance_info": {"a": 1}})
    svc.set_provision_state("n", "active")
    active = run(svc, "n")
    assert (active["provision_state"], active["power_state"]) == ("active", POWER_ON)
    svc.set_provision_state("n", "deleted")
    undeployed = run(svc, "n")
    assert (undeployed["provision_state"], undeployed["power_state"]) == ("available", POWER_OFF)
    assert undeployed["instance_uuid"] is None and undeployed["instance_info"] == {}
    uuid = n["uuid"]
    assert [recorder.count(s, uuid) for s in ("inspect", "deploy", "tear_down", "clean")] == [1, 1, 1, 2]


def test_manual_clean_passes_the_steps_and_returns_to_manageable(
    svc: BaremetalService, recorder: Recorder
) -> None:
    enrolled(svc)
    svc.set_provision_state("n", "manage")
    run(svc, "n")
    steps = [{"interface": "deploy", "step": "erase_devices"}]
    queued = svc.set_provision_state("n", "clean", clean_steps=steps)
    assert queued["target_provision_state"] == "manageable"
    assert queued["driver_internal_info"]["clean_steps"] == steps
    done = run(svc, "n")
    assert done["provision_state"] == "manageable"
    assert "clean_steps" not in done["driver_internal_info"]
    assert recorder.count("clean") == 1


@pytest.mark.parametrize(
    ("failing", "action_path", "final_state", "error_start"),
    [
        pytest.param("power_validate", ["manage"], "enroll", "Failed to get power state", id="verify"),
        pytest.param("inspect", ["manage", "inspect"], "inspect failed", "Failed to inspect hardware",
                     id="inspect"),
        pytest.param("clean", ["manage", "provide"], "clean failed", "Failed to clean node", id="clean"),
        pytest.param("deploy", ["manage", "provide", "active"], "deploy failed", "Failed to deploy",
                     id="deploy"),
        pytest.param("tear_down", ["manage", "provide", "active", "deleted"], "error", "Failed to tear down",
                     id="tear-down"),
    ],
)  # fmt: skip
def test_driver_failures_land_in_last_error_and_the_failed_state(
    database_url: str, failing: str, action_path: list[str], final_state: str, error_start: str
) -> None:
    hw = Recorder()
    with make_service(database_url, hw) as svc:
        enrolled(svc)
        for action in action_path:
            if action == action_path[-1]:
                hw.fail.add(failing)
            svc.set_provision_state("n", action)
            node = run(svc, "n")
        assert node["provision_state"] == final_state
        assert node["last_error"].startswith(error_start)
        assert f"{failing} exploded" in node["last_error"]
        assert (node["target_provision_state"], node["reservation"]) == (None, None)
        # the node is not stuck: the machine's way out of the failed state works
        hw.fail.clear()
        way_out = states.allowed_actions(final_state)[0]
        svc.set_provision_state("n", way_out)
        recovered = run(svc, "n")
        assert states.is_stable(recovered["provision_state"])
        assert recovered["last_error"] is None


def test_missing_required_driver_info_fails_verification(svc: BaremetalService) -> None:
    enrolled(svc, driver_info={})
    assert svc.validate_node("n")["power"] == {
        "result": False,
        "reason": "Missing the following recorder properties in node's driver_info: address",
    }
    svc.set_provision_state("n", "manage")
    node = run(svc, "n")
    assert node["provision_state"] == "enroll"
    assert "Missing the following recorder properties" in node["last_error"]


def test_power_actions_go_through_the_driver(svc: BaremetalService, recorder: Recorder) -> None:
    enrolled(svc)
    queued = svc.set_power_state("n", POWER_ON, timeout=5)
    assert queued["target_power_state"] == POWER_ON and queued["power_state"] is None
    assert run(svc, "n")["power_state"] == POWER_ON
    svc.set_power_state("n", "rebooting")
    assert run(svc, "n")["power_state"] == POWER_ON
    svc.set_power_state("n", POWER_OFF)
    off = run(svc, "n")
    assert (off["power_state"], off["target_power_state"]) == (POWER_OFF, None)
    assert recorder.count("power") == 4  # on, reboot (off + on), off
    recorder.fail.add("power")
    svc.set_power_state("n", POWER_ON)
    failed = run(svc, "n")
    assert (failed["power_state"], failed["target_power_state"]) == (POWER_OFF, None)
    assert failed["last_error"].startswith("Failed to change power state to 'power on'")


def test_background_workers_carry_out_actions_without_help(database_url: str) -> None:
    with BaremetalService(database_url, conductor_workers=2, poll_interval=0.05) as svc:
        svc.create_node({"name": "bg", "driver": "fake-hardware"})
        svc.set_provision_state("bg", "manage")
        node = svc.wait_for_idle("bg", timeout=10)
        assert node["provision_state"] == "manageable"


# -- leases and races ------------------------------------------------------------------------


def test_a_dead_workers_lease_expires_and_the_stale_worker_cannot_write(database_url: str) -> None:
    hw = Recorder()
    with make_service(database_url, hw, lease_timeout=0.5) as svc:
        enrolled(svc)
        svc.set_provision_state("n", "manage")
        node_id = svc.db.get("node", "n")["id"]
        assert svc.db.claim_node(node_id, "dead-worker", lease_timeout=0.5)
        assert svc.conductor.run_once() == 0  # leased: nobody else may act
        assert svc.get_node("n")["provision_state"] == "verifying"
        time.sleep(0.6)
        assert svc.conductor.run_once() == 1
        assert svc.get_node("n")["provision_state"] == "manageable"
        with pytest.raises(LeaseLost):
            svc.conductor.process(node_id, "dead-worker")


def test_a_slow_step_keeps_its_lease_alive(database_url: str) -> None:
    """A step that takes longer than the lease timeout is not taken over: the heartbeat renews it.

    The step lasts 2.7 leases.  The lease (0.9 s, a heartbeat every 0.3 s) leaves room for the
    scheduling delays of a loaded 2-core CI machine; 0.45 s once missed a heartbeat there."""
    hw = Recorder(delay=2.4)
    with make_service(database_url, hw, lease_timeout=0.9) as svc:
        enrolled(svc)
        svc.set_provision_state("n", "manage")
        other = Conductor(svc.db, svc.drivers, name="other", lease_timeout=0.9)
        slow = threading.Thread(target=svc.conductor.run_once)
        slow.start()
        time.sleep(0.1)
        deadline = time.monotonic() + 3.0
        while time.monotonic() < deadline:
            other.run_once()
            time.sleep(0.05)
        slow.join(10)
        assert hw.count("power_validate") == 1
        assert svc.get_node("n")["provision_state"] == "manageable"


def test_racing_worker_threads_carry_out_each_transition_exactly_once(database_url: str) -> None:
    hw = Recorder(delay=0.01)
    with make_service(database_url, hw) as svc:
        names = [f"r{i}" for i in range(12)]
        for name in names:
            enrolled(svc, name)
            svc.set_provision_state(name, "manage")
        conductors = [Conductor(svc.db, svc.drivers, name=f"worker-{i}", lease_timeout=60) for i in range(4)]
        start = threading.Barrier(len(conductors), timeout=10)

        def work(c: Conductor) -> None:
            start.wait()
            deadline = time.monotonic() + 30
            while svc.db.pending_nodes(lease_timeout=60) and time.monotonic() < deadline:
                c.run_once()

        threads = [threading.Thread(target=work, args=(c,)) for c in conductors]
        for t in threads:
            t.start()
        for t in threads:
            t.join(40)
        for name in names:
            node = svc.get_node(name)
            assert node["provision_state"] == "manageable"
            assert hw.count("power_validate", node["uuid"]) == 1
        events = [e for e in svc.list_events(limit=1000) if e["event_type"] == "baremetal.node.conductor.end"]
        assert len(events) == len(names)


_PROCESS_WORKER = r"""
import sys, time, pathlib
from baremetal_service.conductor import Conductor
from baremetal_service.db.api import Database
from baremetal_service.drivers import DriverRegistry, FakeHardware

url, log, name, ready, go = sys.argv[1:6]

class Logged(FakeHardware):
    name = "logged"

    def __init__(self):
        super().__init__()
        deploy = self.deploy.deploy

        def logged(task):
            with open(log, "a") as f:
                f.write(f"{task.uuid} {name}\n")
            time.sleep(0.03)
            return deploy(task)

        self.deploy.deploy = logged

db = Database(url)
conductor = Conductor(db, DriverRegistry(["logged"], extra=[Logged()]), name=name, lease_timeout=60)
pathlib.Path(ready).touch()
deadline = time.monotonic() + 30
while not pathlib.Path(go).exists() and time.monotonic() < deadline:
    time.sleep(0.01)
while db.pending_nodes(lease_timeout=60) and time.monotonic() < deadline:
    conductor.run_once()
db.dispose()
"""


def test_two_worker_processes_carry_out_each_deploy_exactly_once(database_url: str, tmp_path: Path) -> None:
    class Logged(FakeHardware):
        name: ClassVar[str] = "logged"

    with BaremetalService(
        database_url,
        conductor_workers=0,
        enabled_hardware_types=("logged",),
        extra_hardware_types=(Logged(),),
    ) as svc:
        names = [f"p{i}" for i in range(16)]
        for name in names:
            svc.create_node({"name": name, "driver": "logged", "_initial_state": "available"})
            svc.set_provision_state(name, "active")
        log = tmp_path / "deploys.log"
        env = dict(os.environ)
        procs = [
            subprocess.Popen(  # noqa: S603 - our own interpreter and script
                [
                    sys.executable,
                    "-c",
                    _PROCESS_WORKER,
                    database_url,
                    str(log),
                    f"proc-{i}",
                    str(tmp_path / f"ready-{i}"),
                    str(tmp_path / "go"),
                ],
                env=env,
            )  # fmt: skip
            for i in range(2)
        ]
        try:
            deadline = time.monotonic() + 30
            while not all((tmp_path / f"ready-{i}").exists() for i in range(2)):
                assert time.monotonic() < deadline, "worker processes did not start"
                assert all(p.poll() is None for p in procs), "a worker process died"
                time.sleep(0.02)
            (tmp_path / "go").touch()
            for p in procs:
                assert p.wait(timeout=60) == 0
        finally:
            for p in procs:
                if p.poll() is None:
                    p.kill()
                    p.wait(10)
        lines = log.read_text().split()
        deployed = lines[0::2]
        uuids = {svc.get_node(name)["uuid"] for name in names}
        assert sorted(deployed) == sorted(uuids)  # every node deployed, none twice
        assert set(lines[1::2]) == {"proc-0", "proc-1"}  # and the two processes really raced
        for name in names:
            assert svc.get_node(name)["provision_state"] == "active"


def test_driver_validation_errors_are_driver_errors() -> None:
    assert issubclass(DriverValidationError, DriverError)
    registry = DriverRegistry(["fake-hardware"])
    assert registry.names() == ["fake-hardware"]
    assert registry.describe("fake-hardware")["default_network_interface"] == "noop"


def test_a_conductor_never_takes_a_node_it_has_no_driver_for(database_url: str) -> None:
    hw = Recorder()
    fake_only = BaremetalService(database_url, conductor_workers=0)  # fake-hardware only
    with make_service(database_url, hw) as full, fake_only:
        enrolled(full, "rec")
        full.set_provision_state("rec", "manage")
        assert fake_only.conductor.run_once() == 0
        assert full.get_node("rec")["provision_state"] == "verifying"
        assert full.conductor.run_once() == 1
        assert full.get_node("rec")["provision_state"] == "manageable"


def test_database_is_the_only_shared_state(database_url: str) -> None:
    """Two services (two 'processes') on one database see each other's queued work."""
    hw = Recorder()
    with make_service(database_url, hw) as a, make_service(database_url, hw) as b:
        enrolled(a, "shared")
        a.set_provision_state("shared", "manage")
        assert b.conductor.run_once() == 1
        assert a.get_node("shared")["provision_state"] == "manageable"
        assert isinstance(a.db, Database)


_ACTIONS = st.sampled_from(sorted(states.ACTIONS))
_STEPS = st.sets(st.sampled_from(["power_validate", "inspect", "clean", "deploy", "tear_down"]), max_size=2)


@settings(
    max_examples=8,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(actions=st.lists(st.tuples(_ACTIONS, _STEPS), min_size=1, max_size=10))
def test_any_action_sequence_keeps_the_node_consistent(
    svc: BaremetalService, recorder: Recorder, actions: list[tuple[str, set[str]]]
) -> None:
    """Model check: an action is refused (400, naming the allowed ones) exactly when the
    machine does not allow it; after the conductor runs, the node is idle in a stable state."""
    name = f"m{len(svc.list_nodes())}"
    enrolled(svc, name)
    for action, failing in actions:
        recorder.fail = set(failing)
        before = svc.get_node(name)["provision_state"]
        allowed = states.allowed_actions(before)
        steps = [{"interface": "deploy", "step": "x"}] if action == "clean" else None
        try:
            svc.set_provision_state(name, action, clean_steps=steps)
        except exc.InvalidStateRequested as error:
            assert action not in allowed
            assert error.extra["allowed_targets"] == allowed
            continue
        assert action in allowed
        node = run(svc, name)
        assert states.is_stable(node["provision_state"])
        assert (node["target_provision_state"], node["reservation"]) == (None, None)
        assert svc.db.get("node", name)["pending_action"] is None
        assert (node["last_error"] is not None) == (node["provision_state"] in _FAILED_STATES)


_FAILED_STATES = frozenset(
    {states.ENROLL, states.INSPECTFAIL, states.CLEANFAIL, states.DEPLOYFAIL, states.ERROR}
)


def test_bad_conductor_and_driver_configuration_fails_at_startup(database_url: str) -> None:
    with pytest.raises(ConfigError, match="unknown hardware type 'ipmi'"):
        BaremetalService(database_url, enabled_hardware_types=("fake-hardware", "ipmi"))
    with BaremetalService(database_url, conductor_workers=0) as svc:
        for bad in ({"workers": 0}, {"poll_interval": 0}, {"lease_timeout": -1}):
            with pytest.raises(ConfigError):
                Conductor(svc.db, svc.drivers, **bad)  # type: ignore[arg-type]
