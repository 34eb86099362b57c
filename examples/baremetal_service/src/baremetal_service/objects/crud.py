"""The generic CRUD of every declared resource (:mod:`baremetal_service.objects.resource`).

``service.crud["port"]`` is the :class:`Crud` of ports::

    crud.create(values, *, project_id=None, token=None) -> doc  # token: the request's ClientToken
    crud.get(ident, *, project_id=None) -> doc
    crud.list(*, project_id=None, limit=None, marker=None, sort_key="id", sort_dir="asc",
              fields=None, **filters) -> [doc]          # filters: the declaration's list_filters
    crud.update(ident, changes, *, project_id=None, if_match=None) -> doc
    crud.delete(ident, *, project_id=None, if_match=None) -> None

Plain dicts in and out (Ironic's field names); ``changes`` is ``{field: value}`` or a
function ``current document -> changes`` (a JSON Patch), called again if a concurrent
write won the race.  Every write goes through the data API's one write path: the
etag is recomputed and stored with the row, If-Match is checked against the stored
etag atomically with the write (412), an event is recorded in the same transaction.

Tenancy follows the declaration's ``scope`` (Ironic's default policy for a
project-scoped caller, ``project_id`` not ``None``):

* ``node``: it sees the resources of the nodes it owns or leases; it creates, changes
  and deletes them only on nodes it owns (a lessee gets 403 ``<policy>:<action>``; a
  node it cannot see is a 400 when a body names it);
* ``owner``: it sees its own (the resource's ``owner``);
* ``public``: it sees its own and the public ones, and changes only its own (403 for a
  public one it does not own);
* ``system``: 403 for everything;
* ``global``: no scoping.

A scoped caller's denied write is 403 whatever its If-Match says (the tenancy verdict
is given on the current document before the write; the write checks it again).
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from baremetal_service import exceptions as exc
from baremetal_service.db.api import CreatedBefore, Database, IfMatchArg, is_uuid_like, public
from baremetal_service.objects.resource import Resource

__all__ = ["Changes", "Crud"]

Changes = Mapping[str, Any] | Callable[[dict[str, Any]], Mapping[str, Any]]


class Crud:
    """create/get/list/update/delete of one declared resource over the data API."""

    def __init__(self, service: Any, decl: Resource) -> None:
        self.service = service
        self.decl = decl
        self.db: Database = service.db
        self.store = decl.store_kind
        self._scoped_reads = decl.scope in ("node", "owner", "public")

    # -- helpers (hooks use them too) --------------------------------------------------------

    def _pid(self, project_id: str | None) -> str | None:
        """The project the data API scopes reads and writes by (None: unscoped)."""
        return project_id if self._scoped_reads else None

    def _system_only(self, project_id: str | None, action: str) -> None:
        if project_id is not None and self.decl.scope == "system":
            raise exc.PolicyForbidden(f"{self.decl.policy}:{action}")

    def authorize(self, current: Mapping[str, Any], project_id: str | None, action: str) -> None:
        """The tenancy verdict for a write of *current* by *project_id* (see the module doc)."""
        if project_id is None:
            return
        scope = self.decl.scope
        if scope == "node" and current.get("_owner") != project_id:
            raise exc.PolicyForbidden(f"{self.decl.policy}:{action}")
        if scope == "public" and current.get("owner") != project_id:
            if current.get("public"):
                raise exc.PolicyForbidden(f"{self.decl.policy}:{action}")
            self.db.get(self.store, str(current.get("uuid")), project_id=project_id)  # not found

    def owned_node(self, ident: Any, project_id: str | None, action: str) -> dict[str, Any]:
        """The node a write puts a node-scoped resource on: visible (else 400), owned (else 403)."""
        try:
            node = self.db.get("node", str(ident), project_id=project_id)
        except exc.NodeNotFound as error:
            error.status = 400
            raise
        if project_id is not None and node.get("owner") != project_id:
            raise exc.PolicyForbidden(f"{self.decl.policy}:{action}")
        return node

    def values(self, values: Mapping[str, Any], *, creating: bool) -> dict[str, Any]:
        """Checked, canonical values of a create or an update (400 for anything unknown)."""
        decl = self.decl
        allowed = decl.creatable_fields if creating else decl.updatable_fields
        unknown = sorted(set(values) - allowed)
        if unknown:
            raise exc.InvalidParameterValue(
                f"Unknown or read-only {decl.name} field(s): {', '.join(unknown)}", fields=unknown
            )
        out = dict(values)
        if creating and "uuid" in out:
            uuid = out.pop("uuid")
            if uuid:
                if not isinstance(uuid, str) or not is_uuid_like(uuid):
                    raise exc.InvalidParameterValue(f"Expected a UUID but received {uuid}.", field="uuid")
                out["uuid"] = uuid.lower()
        for key, default in decl.null_defaults.items():
            if key in out and out[key] is None:
                out[key] = copy.copy(default)
        if decl.normalise is not None:
            out = decl.normalise(out, creating)
        return out

    def present(self, doc: Mapping[str, Any]) -> dict[str, Any]:
        shown = self.decl.present
        return shown(doc) if shown is not None else public(doc)

    # -- CRUD ----------------------------------------------------------------------------

    def create(
        self, values: Mapping[str, Any], *, project_id: str | None = None, token: Any = None
    ) -> dict[str, Any]:
        """Create one; with *token* (an :class:`apimw.idempotency.ClientToken`) recorded in the
        row's transaction, a retry that an earlier execution already served gets that resource
        (its after-create steps are not run again)."""
        decl = self.decl
        if decl.read_only:
            raise exc.InvalidParameterValue(f"A {decl.name} cannot be created.")
        # a retry whose store record is gone: answered before the checks below, whose outcome
        # the first execution may have changed (the node's owner, the node itself)
        before = self.db.created_before(self.store, token)
        if before is not None:
            return self.present(before)
        self._system_only(project_id, "create")
        row = self.values(values, creating=True)
        if decl.scope == "node" and project_id is not None and row.get("node_uuid") is not None:
            self.owned_node(row["node_uuid"], project_id, "create")
        if decl.check_create is not None:
            decl.check_create(self, row, project_id)
        try:
            doc = self.db.insert(self.store, row, project_id=self._pid(project_id), token=token)
        except CreatedBefore as before:
            return self.present(before.doc)
        if decl.after_create is not None:
            return dict(decl.after_create(self, doc, values, project_id))
        return self.present(doc)

    def get(self, ident: str, *, project_id: str | None = None) -> dict[str, Any]:
        self._system_only(project_id, "get")
        doc = self.db.get(self.store, ident, project_id=self._pid(project_id), internal=False)
        return self.present(doc) if self.decl.present is not None else doc

    def list(
        self,
        *,
        project_id: str | None = None,
        limit: int | None = None,
        marker: str | None = None,
        sort_key: str = "id",
        sort_dir: str = "asc",
        fields: Iterable[str] | None = None,
        **filters: Any,
    ) -> list[dict[str, Any]]:
        decl = self.decl
        self._system_only(project_id, "get")
        equals: dict[str, Any] = {}
        for keyword, value in filters.items():
            if value is None:
                continue
            field = decl.list_filters.get(keyword)
            if field is None:
                raise exc.InvalidParameterValue(f"Unknown {decl.name} filter {keyword!r}")
            related = decl.relations.get(field)
            if related is not None:
                try:
                    ref = self.db.get(related, str(value), project_id=project_id)
                except exc.NotFound as error:
                    error.status = decl.filter_not_found
                    raise
                equals[field.removesuffix("_uuid") + "_id"] = ref["id"]
            else:
                equals[field] = str(value).lower() if field == "address" else value
        narrowed = None if fields is None else {*fields, *decl.present_needs}
        docs = self.db.list(
            self.store, equals=equals, project_id=self._pid(project_id), limit=limit, marker=marker,
            sort_key=sort_key, sort_dir=sort_dir, fields=narrowed, internal=False,
        )  # fmt: skip
        if decl.present is None:
            return docs
        return [decl.present(doc) for doc in docs]

    def update(
        self,
        ident: str,
        changes: Changes,
        *,
        project_id: str | None = None,
        if_match: IfMatchArg = None,
    ) -> dict[str, Any]:
        decl = self.decl
        if decl.read_only:
            raise exc.InvalidParameterValue(f"A {decl.name} cannot be changed.")
        self._system_only(project_id, "update")

        def mutate(current: dict[str, Any]) -> dict[str, Any]:
            self.authorize(current, project_id, "update")
            wanted = changes(copy.deepcopy(public(current))) if callable(changes) else changes
            out = self.values(wanted, creating=False)
            out = {k: v for k, v in out.items() if current.get(k) != v}
            if not out:
                return out
            if decl.scope == "node" and "node_uuid" in out and project_id is not None:
                self.owned_node(out["node_uuid"], project_id, "update")
            if decl.check_update is not None:
                decl.check_update(self, current, out, project_id)
            return out

        pid = self._pid(project_id)
        if project_id is not None and decl.scope in ("node", "public"):
            self.authorize(self.db.get(self.store, ident, project_id=pid), project_id, "update")
        doc = self.db.update(
            self.store, ident, mutate, if_match=if_match, project_id=pid,
            conditions=decl.update_conditions,
        )  # fmt: skip
        return self.present(doc)

    def delete(self, ident: str, *, project_id: str | None = None, if_match: IfMatchArg = None) -> None:
        decl = self.decl
        if decl.read_only:
            raise exc.InvalidParameterValue(f"A {decl.name} cannot be deleted.")
        self._system_only(project_id, "delete")

        def check(current: dict[str, Any]) -> None:
            self.authorize(current, project_id, "delete")
            if decl.check_delete is not None:
                decl.check_delete(self, current, project_id)

        pid = self._pid(project_id)
        if project_id is not None and decl.scope in ("node", "public"):
            self.authorize(self.db.get(self.store, ident, project_id=pid), project_id, "delete")
        doc = self.db.delete(
            self.store, ident, check=check, if_match=if_match, project_id=pid,
            conditions=decl.delete_conditions,
        )  # fmt: skip
        if decl.after_delete is not None:
            decl.after_delete(self, doc)
