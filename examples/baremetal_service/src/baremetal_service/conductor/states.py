"""The provision state machine, built on ``automaton`` (as Ironic's is).

The transitions are the machine's (``add_transition`` below); everything else is
derived from it: which API actions a state allows, the state an action lands in,
and the target state a transitional state is heading for.

Stable states wait for a user action; transitional states (``verifying``,
``inspecting``, ``cleaning``, ``deploying``, ``deleting``) are worked through by
the conductor, which runs the driver step of the state and then fires its
success event (or ``fail``)::

    enroll --manage--> verifying --done--> manageable
    manageable --provide--> cleaning --done--> available
    manageable --clean--> cleaning --manage--> manageable      (manual cleaning)
    manageable --inspect--> inspecting --done--> manageable
    available --deploy--> deploying --done--> active
    active --delete--> deleting --clean--> cleaning --done--> available
    any transitional state --fail--> its failed state (enroll, inspect failed,
    clean failed, deploy failed, error)
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import Final

from automaton import machines

__all__ = [
    "ACTIONS",
    "ACTIVE",
    "AVAILABLE",
    "CLEANFAIL",
    "CLEANING",
    "DELETING",
    "DEPLOYFAIL",
    "DEPLOYING",
    "ENROLL",
    "ERROR",
    "INSPECTFAIL",
    "INSPECTING",
    "MACHINE",
    "MANAGEABLE",
    "STEPS",
    "VERIFYING",
    "Step",
    "allowed_actions",
    "can_do",
    "is_stable",
    "next_state",
    "target_of",
]

ENROLL: Final = "enroll"
VERIFYING: Final = "verifying"
MANAGEABLE: Final = "manageable"
INSPECTING: Final = "inspecting"
INSPECTFAIL: Final = "inspect failed"
CLEANING: Final = "cleaning"
CLEANFAIL: Final = "clean failed"
AVAILABLE: Final = "available"
DEPLOYING: Final = "deploying"
DEPLOYFAIL: Final = "deploy failed"
ACTIVE: Final = "active"
DELETING: Final = "deleting"
ERROR: Final = "error"

#: API action (``{"target": ...}`` of ``PUT .../states/provision``) -> machine event.
ACTIONS: Final[Mapping[str, str]] = {
    "manage": "manage",
    "provide": "provide",
    "inspect": "inspect",
    "active": "deploy",
    "rebuild": "rebuild",
    "deleted": "delete",
    "clean": "clean",
}


@dataclass(frozen=True)
class Step:
    """The driver work of a transitional state and the event fired when it succeeds."""

    name: str  # verify | inspect | deploy | tear_down | clean
    done_event: str


#: What the conductor does in each transitional state (the states without a Step are stable).
STEPS: Final[Mapping[str, Step]] = {
    VERIFYING: Step("verify", "done"),
    INSPECTING: Step("inspect", "done"),
    CLEANING: Step("clean", "done"),
    DEPLOYING: Step("deploy", "done"),
    DELETING: Step("tear_down", "clean"),
}
#: Manual cleaning (action ``clean``) returns to manageable instead of available.
MANUAL_CLEAN_DONE_EVENT: Final = "manage"


def _build() -> machines.FiniteMachine:
    m = machines.FiniteMachine()
    for state in (ENROLL, VERIFYING, MANAGEABLE, INSPECTING, INSPECTFAIL, CLEANING, CLEANFAIL,
                  AVAILABLE, DEPLOYING, DEPLOYFAIL, ACTIVE, DELETING, ERROR):  # fmt: skip
        m.add_state(state)
    # enrolment: verify that the node can be managed
    m.add_transition(ENROLL, VERIFYING, "manage")
    m.add_transition(VERIFYING, MANAGEABLE, "done")
    m.add_transition(VERIFYING, ENROLL, "fail")
    # inspection
    m.add_transition(MANAGEABLE, INSPECTING, "inspect")
    m.add_transition(INSPECTING, MANAGEABLE, "done")
    m.add_transition(INSPECTING, INSPECTFAIL, "fail")
    m.add_transition(INSPECTFAIL, INSPECTING, "inspect")
    m.add_transition(INSPECTFAIL, MANAGEABLE, "manage")
    # cleaning: automated (provide, undeploy) and manual (clean)
    m.add_transition(MANAGEABLE, CLEANING, "provide")
    m.add_transition(MANAGEABLE, CLEANING, "clean")
    m.add_transition(CLEANING, AVAILABLE, "done")
    m.add_transition(CLEANING, MANAGEABLE, "manage")
    m.add_transition(CLEANING, CLEANFAIL, "fail")
    m.add_transition(CLEANFAIL, MANAGEABLE, "manage")
    m.add_transition(AVAILABLE, MANAGEABLE, "manage")
    # deployment
    m.add_transition(AVAILABLE, DEPLOYING, "deploy")
    m.add_transition(DEPLOYING, ACTIVE, "done")
    m.add_transition(DEPLOYING, DEPLOYFAIL, "fail")
    m.add_transition(DEPLOYFAIL, DEPLOYING, "deploy")
    m.add_transition(DEPLOYFAIL, DEPLOYING, "rebuild")
    m.add_transition(ACTIVE, DEPLOYING, "rebuild")
    # undeployment
    m.add_transition(ACTIVE, DELETING, "delete")
    m.add_transition(DEPLOYFAIL, DELETING, "delete")
    m.add_transition(ERROR, DELETING, "delete")
    m.add_transition(ERROR, DEPLOYING, "rebuild")
    m.add_transition(DELETING, CLEANING, "clean")
    m.add_transition(DELETING, ERROR, "fail")
    m.freeze()
    return m


MACHINE: Final = _build()
_STATES: Final = frozenset(MACHINE.states)


def is_stable(state: str) -> bool:
    return state not in STEPS


@lru_cache(maxsize=256)
def next_state(state: str, event: str) -> str | None:
    """Where *event* takes a node in *state*, per the machine; ``None`` if not allowed."""
    if state not in _STATES:
        return None
    machine = MACHINE.copy(shallow=True)
    machine.initialize(state)
    if not machine.is_actionable_event(event):
        return None
    machine.process_event(event)
    return str(machine.current_state)


def can_do(state: str, action: str) -> bool:
    event = ACTIONS.get(action)
    return event is not None and next_state(state, event) is not None


def allowed_actions(state: str) -> list[str]:
    """The API actions the machine accepts from *state*, sorted."""
    return sorted(a for a in ACTIONS if can_do(state, a))


def done_event(state: str, action: str) -> str:
    """The success event of the transitional *state* while carrying out *action*."""
    if state == CLEANING and action == "clean":
        return MANUAL_CLEAN_DONE_EVENT
    return STEPS[state].done_event


@lru_cache(maxsize=256)
def target_of(state: str, action: str) -> str | None:
    """The stable state a node in *state* reaches if every step of *action* succeeds."""
    seen = 0
    while not is_stable(state):
        nxt = next_state(state, done_event(state, action))
        if nxt is None or seen > len(_STATES):
            raise RuntimeError(f"state machine has no way out of {state!r} for {action!r}")
        state, seen = nxt, seen + 1
    return state if seen else None
