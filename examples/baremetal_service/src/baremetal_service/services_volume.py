"""Volume connectors and volume targets (Ironic's ``/v1/volume``, microversion 1.32).

Both belong to a node and follow its tenancy, like ports: a project-scoped caller
sees those of the nodes it owns or leases, and creates, changes or deletes them
only on nodes it owns (a lessee gets 403 ``baremetal.forbidden``; a node it
cannot see is not found).  Ironic's state rules, checked atomically with the
write (the UPDATE/DELETE carries the node condition, so a node powered on between
the check and the write makes the write retry and then fail):

* a connector or target changes only while its node is powered off (and, when it
  moves, while the new node is too): else 400 ``baremetal.invalid-node-state``
  ('The requested action "volume connector update" can not be performed on node
  "<uuid>" while it is in state "<power state>".');
* it is deleted while its node is powered off or enroll, manageable or adopt failed;
* creating one has no state rule (Ironic's neither).

A connector is unique per ``(type, connector_id)`` and a target per ``(node,
boot_index)``: 409 with Ironic's text, decided by the database's unique constraints.
Deleting a node deletes its connectors and targets (``ON DELETE CASCADE``).

Served as ``service.volumes`` (:class:`Volumes`); the HTTP side is
:mod:`baremetal_service.api.volume`.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Final

import sqlalchemy as sa

from . import exceptions as exc
from .db.api import NODES, VOLUME_CONNECTORS, VOLUME_TARGETS, IfMatchArg, public

__all__ = ["CONNECTOR_UPDATABLE", "TARGET_UPDATABLE", "Volumes"]

POWER_OFF: Final = "power off"
#: Provision states in which a volume resource may be deleted whatever the power state
#: (Ironic's ``states.DELETE_ALLOWED_STATES``).
DELETE_STATES: Final = ("manageable", "enroll", "adopt failed")
CONNECTOR_UPDATABLE: Final = frozenset({"type", "connector_id", "node_uuid", "extra"})
TARGET_UPDATABLE: Final = frozenset(
    {"volume_type", "properties", "boot_index", "volume_id", "node_uuid", "extra"}
)
_LABELS: Final = {"volume_connector": "volume connector", "volume_target": "volume target"}
_TABLES: Final = {"volume_connector": VOLUME_CONNECTORS, "volume_target": VOLUME_TARGETS}

Changes = Mapping[str, Any] | Callable[[dict[str, Any]], Mapping[str, Any]]


def _node_powered_off(table: sa.Table) -> sa.ColumnElement[bool]:
    return sa.exists().where(NODES.c.id == table.c.node_id, NODES.c.power_state == POWER_OFF)


def _node_deletable(table: sa.Table) -> sa.ColumnElement[bool]:
    return sa.exists().where(
        NODES.c.id == table.c.node_id,
        sa.or_(NODES.c.power_state == POWER_OFF, NODES.c.provision_state.in_(DELETE_STATES)),
    )


class Volumes:
    """The volume connectors and targets of a :class:`~.service.BaremetalService`."""

    def __init__(self, service: Any) -> None:
        self._service = service
        self.db = service.db

    # -- shared ------------------------------------------------------------------------

    def _node(self, ident: Any, project_id: str | None, *, status: int | None = None) -> dict[str, Any]:
        try:
            return dict(self.db.get("node", str(ident), project_id=project_id))
        except exc.NodeNotFound as error:
            if status is not None:
                error.status = status
            raise

    def _owned_node(self, ident: Any, project_id: str | None, rule: str) -> dict[str, Any]:
        """The node a write puts a volume resource on: visible (else 400) and owned (else 403)."""
        node = self._node(ident, project_id, status=400)
        if project_id is not None and node.get("owner") != project_id:
            raise exc.PolicyForbidden(rule)
        return node

    def _values(self, kind: str, values: Mapping[str, Any], allowed: frozenset[str]) -> dict[str, Any]:
        unknown = sorted(set(values) - allowed)
        if unknown:
            raise exc.InvalidParameterValue(
                f"Unknown or read-only {_LABELS[kind]} field(s): {', '.join(unknown)}", fields=unknown
            )
        out = dict(values)
        for key in ("extra", "properties"):
            if key in out and out[key] is None:
                out[key] = {}
        return out

    def _create(
        self, kind: str, values: Mapping[str, Any], allowed: frozenset[str], project_id: str | None
    ) -> dict[str, Any]:
        row = self._values(kind, values, allowed | {"uuid"})
        if "uuid" in row and row["uuid"] is None:
            del row["uuid"]
        node = self._owned_node(row.get("node_uuid"), project_id, "baremetal:volume:create")
        row["node_uuid"] = node["uuid"]
        return public(self.db.insert(kind, row, project_id=project_id))

    def _list(
        self,
        kind: str,
        *,
        project_id: str | None,
        node: str | None,
        limit: int | None,
        marker: str | None,
        sort_key: str,
        sort_dir: str,
        fields: Iterable[str] | None,
    ) -> list[dict[str, Any]]:
        where: list[sa.ColumnElement[bool]] = []
        if node is not None:
            where.append(_TABLES[kind].c.node_id == self._node(node, project_id)["id"])
        return self.db.list(
            kind, where=where, project_id=project_id, limit=limit, marker=marker,
            sort_key=sort_key, sort_dir=sort_dir, fields=fields, internal=False,
        )  # fmt: skip

    def _update(
        self,
        kind: str,
        ident: str,
        changes: Changes,
        allowed: frozenset[str],
        project_id: str | None,
        if_match: IfMatchArg,
    ) -> dict[str, Any]:
        label = _LABELS[kind]
        table = _TABLES[kind]

        def owner_only(current: dict[str, Any]) -> None:
            if project_id is not None and current.get("_owner") != project_id:
                raise exc.PolicyForbidden("baremetal:volume:update")

        def mutate(current: dict[str, Any]) -> dict[str, Any]:
            owner_only(current)
            wanted = changes(copy.deepcopy(public(current))) if callable(changes) else changes
            out = self._values(kind, wanted, allowed)
            out = {k: v for k, v in out.items() if current.get(k) != v}
            if not out:
                return out
            node = self._node(current["node_uuid"], None)
            if node.get("power_state") != POWER_OFF:
                raise exc.NodeStateForbidsAction(f"{label} update", node["uuid"], node.get("power_state"))
            if "node_uuid" in out:
                new = self._owned_node(out["node_uuid"], project_id, "baremetal:volume:update")
                if new.get("power_state") != POWER_OFF:
                    raise exc.NodeStateForbidsAction(f"{label} update", new["uuid"], new.get("power_state"))
                out["node_uuid"] = new["uuid"]
                if new["uuid"] == current["node_uuid"]:
                    del out["node_uuid"]
            return out

        if project_id is not None:  # the tenancy verdict before If-Match: 403 wins over 412
            owner_only(self.db.get(kind, ident, project_id=project_id))
        doc = self.db.update(
            kind, ident, mutate, if_match=if_match, project_id=project_id,
            where=[_node_powered_off(table)],
        )  # fmt: skip
        return public(doc)

    def _delete(self, kind: str, ident: str, project_id: str | None, if_match: IfMatchArg) -> None:
        label = _LABELS[kind]

        def check(current: dict[str, Any]) -> None:
            if project_id is not None and current.get("_owner") != project_id:
                raise exc.PolicyForbidden("baremetal:volume:delete")
            node = self._node(current["node_uuid"], None)
            state = node.get("power_state")
            if node["provision_state"] not in DELETE_STATES and state != POWER_OFF:
                raise exc.NodeStateForbidsAction(f"{label} deletion", node["uuid"], state)

        if project_id is not None:
            current = self.db.get(kind, ident, project_id=project_id)
            if current.get("_owner") != project_id:
                raise exc.PolicyForbidden("baremetal:volume:delete")
        self.db.delete(
            kind, ident, check=check, if_match=if_match, project_id=project_id,
            where=[_node_deletable(_TABLES[kind])],
        )  # fmt: skip

    # -- connectors --------------------------------------------------------------------

    def create_connector(self, values: Mapping[str, Any], *, project_id: str | None = None) -> dict[str, Any]:
        return self._create("volume_connector", values, CONNECTOR_UPDATABLE, project_id)

    def get_connector(self, ident: str, *, project_id: str | None = None) -> dict[str, Any]:
        return self.db.get("volume_connector", ident, project_id=project_id, internal=False)

    def list_connectors(
        self,
        *,
        project_id: str | None = None,
        node: str | None = None,
        limit: int | None = None,
        marker: str | None = None,
        sort_key: str = "id",
        sort_dir: str = "asc",
        fields: Iterable[str] | None = None,
    ) -> list[dict[str, Any]]:
        return self._list(
            "volume_connector", project_id=project_id, node=node, limit=limit, marker=marker,
            sort_key=sort_key, sort_dir=sort_dir, fields=fields,
        )  # fmt: skip

    def update_connector(
        self,
        ident: str,
        changes: Changes,
        *,
        project_id: str | None = None,
        if_match: IfMatchArg = None,
    ) -> dict[str, Any]:
        return self._update("volume_connector", ident, changes, CONNECTOR_UPDATABLE, project_id, if_match)

    def delete_connector(
        self, ident: str, *, project_id: str | None = None, if_match: IfMatchArg = None
    ) -> None:
        self._delete("volume_connector", ident, project_id, if_match)

    # -- targets -----------------------------------------------------------------------

    def create_target(self, values: Mapping[str, Any], *, project_id: str | None = None) -> dict[str, Any]:
        return self._create("volume_target", values, TARGET_UPDATABLE, project_id)

    def get_target(self, ident: str, *, project_id: str | None = None) -> dict[str, Any]:
        return self.db.get("volume_target", ident, project_id=project_id, internal=False)

    def list_targets(
        self,
        *,
        project_id: str | None = None,
        node: str | None = None,
        limit: int | None = None,
        marker: str | None = None,
        sort_key: str = "id",
        sort_dir: str = "asc",
        fields: Iterable[str] | None = None,
    ) -> list[dict[str, Any]]:
        return self._list(
            "volume_target", project_id=project_id, node=node, limit=limit, marker=marker,
            sort_key=sort_key, sort_dir=sort_dir, fields=fields,
        )  # fmt: skip

    def update_target(
        self,
        ident: str,
        changes: Changes,
        *,
        project_id: str | None = None,
        if_match: IfMatchArg = None,
    ) -> dict[str, Any]:
        return self._update("volume_target", ident, changes, TARGET_UPDATABLE, project_id, if_match)

    def delete_target(
        self, ident: str, *, project_id: str | None = None, if_match: IfMatchArg = None
    ) -> None:
        self._delete("volume_target", ident, project_id, if_match)
