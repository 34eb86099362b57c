"""Allocations (``/v1/allocations``, Ironic 1.52; PATCH 1.57; backfill 1.58; owner 1.60).

An allocation reserves a node matching a request.  Scoped by its own ``owner`` (a
project sees its own).  This module declares the resource (:data:`ALLOCATIONS`, served
by the generic CRUD) and runs the allocation process (:class:`AllocationService`,
reached as ``service.allocations``).

Create answers at once with ``state: allocating``; a background thread then runs
Ironic's allocation process (``ironic/conductor/allocations.py``):

1. candidates: nodes with the allocation's ``resource_class``, ``available``, not in
   maintenance, with a known power state, no instance and no allocation; among
   ``candidate_nodes`` if given; owned or leased by the allocation's ``owner`` if it
   has one; whose ``traits`` include every requested trait (read from the node
   document, when the service has node traits);
2. in random order (a node named like the allocation first), take the first one:
   a. the allocation's ``node_id`` is set -- a unique column, so among concurrent
      allocations exactly one gets a node;
   b. the node's ``instance_uuid`` is set to the allocation's UUID, conditional on the
      node still being free (``instance_uuid IS NULL``, ``available``, no lease);
      if that fails, (a) is undone and the next candidate is tried;
   c. ``state: active``.
   With no candidate: ``state: error`` and Ironic's ``last_error`` text.

Backfill (1.58, ``node`` in the body) associates an ``active`` node synchronously.
Deleting an allocation frees its node (``instance_uuid`` cleared), refused (409) while
the node is ``active`` and not in maintenance, like Ironic.
"""

from __future__ import annotations

import contextlib
import logging
import random
import threading
import uuid as uuidlib
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any, Final

from baremetal_service import exceptions as exc
from baremetal_service import versions
from baremetal_service.db.api import Database, IfMatchArg, public
from baremetal_service.objects.resource import Resource
from baremetal_service.schemas import ALLOCATION_CREATE
from baremetal_service.versions import ETAG_VERSION, FIRST, Fields

if TYPE_CHECKING:
    from baremetal_service.objects.crud import Crud

__all__ = ["AllocationService"]


def check_create(crud: Crud, row: dict[str, Any], project_id: str | None) -> None:
    crud.service.allocations.prepare_create(row, project_id)


def after_create(crud: Crud, doc: dict[str, Any], values: Any, project_id: str | None) -> dict[str, Any]:
    return crud.service.allocations.start(doc, values, project_id)  # type: ignore[no-any-return]


def check_delete(crud: Crud, current: dict[str, Any], project_id: str | None) -> None:
    crud.service.allocations.check_delete(current)


def after_delete(crud: Crud, doc: dict[str, Any]) -> None:
    crud.service.allocations.deleted(doc)


FIELDS: Final = Fields({
    "uuid": FIRST, "created_at": FIRST, "updated_at": FIRST, "candidate_nodes": FIRST, "extra": FIRST,
    "last_error": FIRST, "name": FIRST, "owner": versions.ALLOCATION_OWNER, "resource_class": FIRST,
    "state": FIRST, "traits": FIRST, "links": FIRST, "node_uuid": FIRST, "etag": ETAG_VERSION,
})  # fmt: skip

ALLOCATIONS: Final = Resource(
    kind="allocation",
    fields=FIELDS,
    list_fields=FIELDS.names,
    create_schema=ALLOCATION_CREATE,
    patchable=("name", "extra"),
    sort_keys=("uuid", "name", "created_at", "updated_at", "state", "resource_class"),
    since=versions.ALLOCATIONS,
    refuse_early_writes=True,
    filters=(
        ("node", versions.ALLOCATIONS),
        ("resource_class", versions.ALLOCATIONS),
        ("state", versions.ALLOCATIONS),
        ("owner", versions.ALLOCATION_OWNER),
    ),
    defaults={"candidate_nodes": []},
    write_once=frozenset({"resource_class", "candidate_nodes", "traits", "owner", "node"}),
    scope="owner",
    policy="baremetal:allocation",
    relations={"node_uuid": "node"},
    list_filters={
        "node": "node_uuid",
        "resource_class": "resource_class",
        "state": "state",
        "owner": "owner",
    },
    filter_not_found=400,
    null_defaults={"extra": {}},
    check_create=check_create,
    after_create=after_create,
    check_delete=check_delete,
    after_delete=after_delete,
    routes=False,  # handlers/allocations.py: version rules of create and PATCH, the node's allocation
)
DECLARED: Final = (ALLOCATIONS,)


LOG = logging.getLogger(__name__)
ALLOCATING: Final = "allocating"
ACTIVE: Final = "active"
ERROR: Final = "error"


class _Failed(Exception):
    pass


class AllocationService:
    """*service* is the :class:`~baremetal_service.objects.service.BaremetalService` (node reads)."""

    def __init__(self, service: Any, *, asynchronous: bool = True) -> None:
        self.service = service
        self.db: Database = service.db
        self.asynchronous = asynchronous
        self._executor: ThreadPoolExecutor | None = None
        self._lock = threading.Lock()

    def close(self) -> None:
        with self._lock:
            executor, self._executor = self._executor, None
        if executor is not None:
            executor.shutdown(wait=True)

    def _submit(self, uuid: str) -> None:
        if not self.asynchronous:
            self.process(uuid)
            return
        with self._lock:
            if self._executor is None:
                self._executor = ThreadPoolExecutor(max_workers=2, thread_name_prefix="allocations")
            self._executor.submit(self._run, uuid)

    def _run(self, uuid: str) -> None:
        try:
            self.process(uuid)
        except exc.AllocationNotFound:
            pass  # deleted meanwhile
        except Exception as error:  # never leave it allocating
            LOG.exception("allocation %s failed unexpectedly", uuid)
            self._fail(uuid, f"Unexpected exception during allocation: {error}")

    # -- the CRUD's hooks (objects/allocations.py declares them) -----------------------------

    def prepare_create(self, row: dict[str, Any], project_id: str | None) -> None:
        """A new allocation's row: the owner, the node to backfill, candidate UUIDs, state."""
        node_ident = row.pop("node", None)
        if project_id is not None:
            if row.get("owner") not in (None, project_id):
                raise exc.PolicyForbidden("baremetal:allocation:create_restricted")
            row["owner"] = project_id
        node: dict[str, Any] | None = None
        if node_ident is not None:
            node = self._node_for_body(node_ident, project_id)
        if not row.get("resource_class"):
            if node is None:
                raise exc.Invalid("The resource_class field is mandatory when not backfilling")
            row["resource_class"] = node.get("resource_class")
        if row.get("candidate_nodes"):
            row["candidate_nodes"] = [
                self._node_for_body(ident, project_id)["uuid"] for ident in row["candidate_nodes"]
            ]
        for key, empty in (("candidate_nodes", []), ("traits", []), ("extra", {})):
            if row.get(key) is None:
                row[key] = empty
        if not row.get("uuid"):
            if node is not None and node.get("instance_uuid"):
                row["uuid"] = node["instance_uuid"]
            else:
                row["uuid"] = str(uuidlib.uuid4())
        row["state"] = ALLOCATING
        row["last_error"] = None

    def _node_for_body(self, ident: Any, project_id: str | None) -> dict[str, Any]:
        try:
            return self.db.get("node", str(ident), project_id=project_id)
        except exc.NodeNotFound as error:
            error.status = 400
            raise

    def start(self, doc: dict[str, Any], values: Mapping[str, Any], project_id: str | None) -> dict[str, Any]:
        """After the insert: backfill the node named in the body, or start the process."""
        if values.get("node") is not None:
            return self._backfill(doc, self._node_for_body(values["node"], project_id))
        self._submit(doc["uuid"])
        return public(doc)

    def check_delete(self, current: dict[str, Any]) -> None:
        if current.get("node_id") is None:
            return
        node = self.db.get_by_id("node", current["node_id"])
        if node is None or node.get("maintenance"):
            return
        if node.get("target_provision_state") and node["provision_state"] not in _UPDATE_ALLOWED:
            raise exc.InvalidState(
                f"Cannot remove allocation {current['uuid']} for node {node['uuid']}, because the "
                f"node is in state {node['provision_state']} where updates are not allowed "
                "(and maintenance mode is off)"
            )
        if node["provision_state"] == "active":
            raise exc.InvalidState(
                f"Cannot remove allocation {current['uuid']} for node {node['uuid']}, because the "
                "node is active (and maintenance mode is off)"
            )

    def deleted(self, doc: dict[str, Any]) -> None:
        if doc.get("node_id") is not None:
            self._release_node(doc["node_id"], doc["uuid"])

    def delete_node_allocation(
        self, node_ident: str, *, project_id: str | None = None, if_match: IfMatchArg = None
    ) -> None:
        """*if_match*: the allocation's etag (GET /v1/nodes/{node}/allocation shows it)."""
        node = self.db.get("node", node_ident, project_id=project_id)
        if not node.get("allocation_uuid"):
            raise exc.AllocationNotFound(f"for node {node_ident}")
        allocations = self.service.crud["allocation"]
        allocations.delete(node["allocation_uuid"], project_id=project_id, if_match=if_match)

    def get_node_allocation(self, node_ident: str, *, project_id: str | None = None) -> dict[str, Any]:
        try:
            node = self.db.get("node", node_ident, project_id=project_id)
        except exc.NodeNotFound as error:
            error.status = 400  # Ironic's: the node is the request's parameter, not what it shows
            raise
        if not node.get("allocation_uuid"):
            raise exc.AllocationNotFound(f"for node {node_ident}")
        return self.service.crud["allocation"].get(node["allocation_uuid"])

    # -- the allocation process ------------------------------------------------------------

    def process(self, uuid: str) -> dict[str, Any]:
        allocation = self.db.get("allocation", uuid)
        if allocation["state"] != ALLOCATING:
            return public(allocation)
        try:
            nodes = self._candidates(allocation)
            for node in nodes:
                done = self._take(allocation, node)
                if done is not None:
                    return done
            raise _Failed("all nodes were filtered out during reservation" if nodes else "no candidate nodes")
        except _Failed as failure:
            return self._fail(uuid, f"Failed to process allocation {uuid}: {failure}.")

    def _candidates(self, allocation: Mapping[str, Any]) -> list[dict[str, Any]]:
        rc = allocation.get("resource_class")
        nodes = self.db.allocation_candidates(rc, allocation.get("candidate_nodes"), allocation.get("owner"))
        if not nodes:
            if allocation.get("candidate_nodes"):
                raise _Failed(f"none of the requested nodes are available and match the resource class {rc}")
            raise _Failed(f"no available nodes match the resource class {rc}")
        wanted = set(allocation.get("traits") or [])
        if wanted:
            nodes = [n for n in nodes if wanted <= set(self._traits(n))]
            if not nodes:
                raise _Failed(f"no suitable nodes have the requested traits {', '.join(sorted(wanted))}")
        random.shuffle(nodes)
        name = allocation.get("name")
        if name:
            nodes.sort(key=lambda n: n.get("name") != name)
        return nodes

    def _traits(self, node: Mapping[str, Any]) -> list[str]:
        traits = node.get("traits")
        if traits is None:  # not in the row: ask the service (node traits may live elsewhere)
            try:
                traits = self.service.get_node(node["uuid"]).get("traits")
            except exc.NodeNotFound:
                return []
        return [t if isinstance(t, str) else str(t.get("trait")) for t in traits or []]

    def _take(self, allocation: Mapping[str, Any], node: Mapping[str, Any]) -> dict[str, Any] | None:
        uuid = allocation["uuid"]
        try:
            self.db.update(
                "allocation", uuid, lambda cur: {"node_uuid": node["uuid"]}, match={"state": ALLOCATING}
            )
        except exc.AllocationNodeTaken:
            return None
        except exc.Conflict:
            return None
        try:
            self.db.update(
                "node", node["uuid"], lambda cur: {"instance_uuid": uuid},
                match={"instance_uuid": None, "provision_state": "available", "reservation": None,
                       "maintenance": False},
                event_type="baremetal.node.allocation.end", on_conflict=_node_taken,
            )  # fmt: skip
        except (exc.Conflict, exc.NodeNotFound):
            self.db.update("allocation", uuid, lambda cur: {"node_uuid": None})
            return None
        return public(self.db.update("allocation", uuid, lambda cur: {"state": ACTIVE, "last_error": None}))

    def _backfill(self, allocation: dict[str, Any], node: Mapping[str, Any]) -> dict[str, Any]:
        uuid = allocation["uuid"]
        errors = []
        if node["provision_state"] != "active":
            errors.append(
                f'Node must be in the "active" state, but the current state is "{node["provision_state"]}"'
            )
        rc = allocation.get("resource_class")
        if rc and node.get("resource_class") != rc:
            errors.append(
                f"Resource class {node.get('resource_class')} does not match the requested "
                f"resource class {rc}"
            )
        wanted = set(allocation.get("traits") or [])
        if wanted and not wanted <= set(self._traits(node)):
            errors.append(
                f"List of traits {self._traits(node)} does not match the requested traits {sorted(wanted)}"
            )
        if allocation.get("candidate_nodes") and node["uuid"] not in allocation["candidate_nodes"]:
            errors.append(
                "Candidate nodes must be empty or contain the target node, but got "
                f"{allocation['candidate_nodes']}"
            )
        if node.get("instance_uuid") not in (None, uuid):
            errors.append(f"Node {node['uuid']} is associated with instance {node['instance_uuid']}")
        if errors:
            text = f"Cannot backfill an allocation for node {node['uuid']}: {'; '.join(errors)}"
            self._fail(uuid, f"Failed to process allocation {uuid}: {text}")
            raise exc.Conflict(text)
        try:
            self.db.update("allocation", uuid, lambda cur: {"node_uuid": node["uuid"]})
        except exc.AllocationNodeTaken:
            text = f"Node {node['uuid']} already has an allocation"
            self._fail(uuid, text)
            raise exc.Conflict(text) from None
        if node.get("instance_uuid") != uuid:
            self.db.update(
                "node", node["uuid"], lambda cur: {"instance_uuid": uuid}, match={"instance_uuid": None}
            )
        return public(self.db.update("allocation", uuid, lambda cur: {"state": ACTIVE, "last_error": None}))

    def _fail(self, uuid: str, reason: str) -> dict[str, Any]:
        try:
            return public(
                self.db.update(
                    "allocation", uuid, lambda cur: {"state": ERROR, "last_error": reason, "node_uuid": None}
                )
            )
        except exc.AllocationNotFound:
            return {}

    def _release_node(self, node_id: int, allocation_uuid: str) -> None:
        node = self.db.get_by_id("node", node_id)
        if node is None or node.get("instance_uuid") != allocation_uuid:
            return

        def free(current: dict[str, Any]) -> dict[str, Any]:
            return {"instance_uuid": None} if current.get("instance_uuid") == allocation_uuid else {}

        with contextlib.suppress(exc.NodeNotFound):
            self.db.update("node", node["uuid"], free, event_type="baremetal.node.allocation_delete.end")


def _node_taken(current: Mapping[str, Any]) -> None:
    """The conditional node write failed: stop at once when the node is no longer free."""
    if (
        current.get("instance_uuid") is not None
        or current.get("provision_state") != "available"
        or current.get("reservation") is not None
        or current.get("maintenance")
    ):
        raise exc.Conflict(f"Node {current.get('uuid')} was taken meanwhile")


#: Ironic's UPDATE_ALLOWED_STATES: where a node with a target state may still be changed.
_UPDATE_ALLOWED: Final = frozenset({
    "deploy failed", "inspecting", "clean failed", "error", "inspect wait", "clean wait",
    "rescue failed", "unrescue failed", "service failed", "service wait", "enroll", "manageable",
    "available", "active", "inspect failed",
})  # fmt: skip
