"""The conductor role: the provision state machine and the workers that carry out actions."""

from __future__ import annotations

from baremetal_service.conductor.worker import PENDING_POWER, PENDING_PROVISION, Conductor, LeaseLost, drain

__all__ = ["PENDING_POWER", "PENDING_PROVISION", "Conductor", "LeaseLost", "drain", "states"]
