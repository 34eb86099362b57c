"""A conductor write fenced by its lease is refused once another worker holds the lease,
even when the write would leave the node's etag as it is (a step's heartbeat-like write
changes only ``reserved_at``, which the etag does not cover)."""

from __future__ import annotations

from typing import Any

import pytest

from baremetal_service.conductor import LeaseLost
from baremetal_service.db.api import utcnow
from tests.example.conductor.test_conductor import Recorder, enrolled, make_service


def test_a_write_after_the_lease_was_taken_over_is_not_applied(database_url: str) -> None:
    with make_service(database_url, Recorder()) as svc:
        enrolled(svc)
        svc.set_provision_state("n", "manage")
        node = svc.db.get("node", "n")
        assert svc.db.claim_node(node["id"], "worker-a", lease_timeout=60)
        before = svc.db.get("node", "n")
        events_before = len(svc.db.list_events(resource_uuid=node["uuid"]))

        def check(current: dict[str, Any]) -> None:
            if current["reservation"] != "worker-a":
                raise LeaseLost(current["uuid"])

        def step_write(current: dict[str, Any]) -> dict[str, Any]:
            check(current)  # worker-a still held the lease when it read the node ...
            # ... and loses it to worker-b before its write reaches the database
            assert svc.db.claim_node(node["id"], "worker-b", lease_timeout=0)
            return {"reserved_at": utcnow()}

        with pytest.raises(LeaseLost):
            svc.db.update("node", "n", step_write, match={"reservation": "worker-a"}, on_conflict=check,
                          event_type="baremetal.node.conductor.step")  # fmt: skip
        after = svc.db.get("node", "n")
        assert after["reservation"] == "worker-b"
        assert after["etag"] == before["etag"]
        assert len(svc.db.list_events(resource_uuid=node["uuid"])) == events_before  # no event recorded
