"""The bare-metal service facade: the one object the HTTP API calls.

Plain dicts in and out, keyed by Ironic's field names; errors are the domain
errors of :mod:`baremetal_service.exceptions` (``HTTPProblem`` subclasses with
Ironic's message text and a stable ``code``).  Documents returned here are
**unmasked** (``driver_info`` secrets included, so a JSON Patch works on the real
values); the API masks ``driver_info`` on output with :meth:`secret_fields`.
Datetimes are ISO 8601 strings in UTC (``...+00:00``).  Every document of a node,
port, portgroup or chassis carries its ``etag`` (``W/"<128 hex>"``).

Construction::

    svc = BaremetalService("sqlite:///baremetal.db")      # or postgresql+psycopg://...
    svc = BaremetalService(url, etag_key=KEY,            # same key as the etag middleware
                           enabled_hardware_types=("fake-hardware",),
                           extra_hardware_types=(),      # HardwareType instances
                           conductor_workers=1,          # 0: no background workers
                           poll_interval=0.2, lease_timeout=120.0)
    svc.close()                                          # stops workers, disposes the pool

It runs the alembic migrations at startup (under a lock: several processes may
start at once), backfills etags of older rows, and starts the conductor workers.

Common keyword arguments:

``project_id``
    The caller's project, or ``None`` for an unscoped (admin / noauth) caller.  A
    scoped caller sees only the nodes it owns or leases (``owner``/``lessee``) and
    their ports and portgroups; anything else is "not found".  A node created by a
    scoped caller is owned by ``project_id``.  Chassis, drivers and resource classes
    are global.  Ironic's default policy for scoped callers: another ``owner`` on
    create is 400; changing ``owner`` is 403 (``baremetal.forbidden``, "Access was
    denied to the following resource: baremetal:node:update:owner"); changing
    ``lessee``, deleting the node and writing its ports and portgroups (create,
    update, delete, or moving one to another node) need the node's owner -- a lessee
    gets 403.  ``None`` (unscoped) may do all of it.
``if_match``
    ``environ["apimw.etag.if_match"]`` as is (an :class:`apimw.etag.IfMatch`, marked
    enforced here), a raw header string, a list of etags, or ``None``.  Checked
    atomically with the write (``UPDATE ... WHERE etag = :read`` in the write's
    transaction): a stale etag is :class:`~.exceptions.PreconditionFailed` (412).

API (``ident`` is a UUID or, where the resource has one, a name):

Nodes
    ``create_node(values, *, project_id=None) -> node``  (``values["_initial_state"]``
    may be ``"available"`` for pre-1.11 clients; default ``"enroll"``)
    ``get_node(ident, *, project_id=None) -> node``
    ``list_nodes(*, project_id=None, filters=None, limit=None, marker=None,
    sort_key="id", sort_dir="asc", fields=None) -> [node]``; ``fields`` (any
    iterable of field names) narrows each document to those fields plus ``uuid``:
    pass the fields a list shows, it saves most of the cost of a 100-node page;
    filters: ``provision_state``, ``driver``, ``resource_class``, ``maintenance``
    (bool), ``associated`` (bool), ``retired`` (bool), ``chassis_uuid``,
    ``instance_uuid``, ``instance_name``, ``conductor_group``, ``owner``, ``lessee``,
    ``shard``, ``fault``, ``description_contains``
    ``update_node(ident, changes, *, project_id=None, if_match=None) -> node``
    (``changes``: ``{field: new value}``, or a function ``current node -> changes`` of its
    argument alone, given a private copy; for a scoped caller its answer for the node the
    tenancy check read is reused when the write reads the same node)
    ``delete_node(ident, *, project_id=None, if_match=None) -> None``
    ``set_provision_state(ident, target, *, project_id=None, clean_steps=None,
    if_match=None) -> node``  (targets: manage, provide, inspect, active, rebuild,
    deleted, clean; asynchronous: the node is returned in its transitional state)
    ``set_power_state(ident, target, *, project_id=None, timeout=None,
    if_match=None) -> node``  (power on, power off, rebooting, soft power off,
    soft rebooting; asynchronous)
    ``set_maintenance(ident, on, reason=None, *, project_id=None, if_match=None) -> node``
    ``validate_node(ident, *, project_id=None) -> {interface: {"result", "reason"}}``
    ``secret_fields(driver) -> frozenset[str]``  (driver_info keys to mask)
    ``node_features``: traits, VIFs, virtual media, firmware components (see
    :mod:`baremetal_service.objects.nodes`, which also holds the retirement and
    instance-name rules every node write applies)
    (every ``list_*`` below takes the same ``fields`` argument)
Declared resources (ports, portgroups, chassis, volume connectors and targets,
deploy templates, runbooks, inspection rules, allocations)
    ``crud[kind]`` (or ``resource(kind)``): the generic CRUD of :mod:`baremetal_service.objects.crud`,
    ``create(values, *, project_id=None)``, ``get(ident, ...)``, ``list(*, project_id=None,
    limit=None, marker=None, sort_key="id", sort_dir="asc", **filters)`` (ports: ``node``,
    ``portgroup``, ``address``; see each declaration's ``list_filters``),
    ``update(ident, changes, *, project_id=None, if_match=None)``,
    ``delete(ident, *, project_id=None, if_match=None)``; each resource's rules are its
    declaration's (:mod:`baremetal_service.objects.resource`)
    ``allocations``: the allocation process; ``runbooks.set_runbook_traits``;
    ``conductors``: the heartbeat registry
Resource classes (placement's idempotent PUT)
    ``ensure_resource_class(name) -> bool`` (True: created -> 201; False: existed -> 204)
    ``create_resource_class(name) -> dict`` (409 if it exists), ``get_resource_class(name)``,
    ``list_resource_classes()``, ``delete_resource_class(name)`` (409 while nodes use it)
    ``validate_resource_class_name(name)`` (400 unless ``CUSTOM_[A-Z0-9_]+``, <= 255)
Drivers
    ``list_drivers() -> [driver doc]``, ``get_driver(name)`` (404), ``driver_properties(name)``
Events
    ``list_events(*, resource_uuid=None, limit=100)``: notification records
    (``event_type``, ``resource_type``, ``resource_uuid``, ``payload``, ``etag``)
Conductor
    ``conductor`` (the :class:`~.conductor.Conductor`; ``conductor.run_once()`` runs
    queued work in the calling thread), ``wait_for_idle(ident, timeout=10)``

Errors (status, ``code``; ``detail`` is Ironic's text):

* unknown resource: 404 ``baremetal.<kind>-not-found`` ("Node X could not be
  found."); 400 with the same code when the missing one is referenced from a body
  (a port's ``node_uuid``, a node's ``chassis_uuid``);
* duplicates: 409 ``baremetal.node-duplicate-name``, ``baremetal.port-duplicate-mac``...;
* delete of a node in a non-deletable state: 409 ``baremetal.node-delete-forbidden``;
  a node with queued work or a conductor lease: 409 ``baremetal.node-locked``;
  a protected node undeployed, rebuilt or deleted: 403 ``baremetal.node-protected``;
* provision action not allowed from the state: 400
  ``baremetal.invalid-state-transition``, the allowed actions named in the text and
  in ``extra["allowed_targets"]``; unknown driver: 400 ``baremetal.unknown-driver``;
  any other bad value: 400 ``baremetal.invalid-parameter``;
* stale If-Match: 412 ``etag.precondition-failed`` (the etag middleware's code);
  an unconditional write that lost 20 races in a row: 409 ``baremetal.conflict``.

Etags hash the API document minus the spec's ignored fields (node:
``driver_internal_info``, ``updated_at``; others: ``updated_at``) and minus the
node's conductor lease ``reservation``; see :mod:`baremetal_service.db.etags` (each
resource declaration's ``etag_ignored``: :func:`etag_ignored_fields`).
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Final

from apimw.errors import HTTPProblem
from apimw.etag import ETagGenerator
from baremetal_service import exceptions as exc
from baremetal_service.conductor import PENDING_POWER, PENDING_PROVISION, Conductor, states
from baremetal_service.conductor.token_purge import DEFAULT_INTERVAL as DEFAULT_PURGE_INTERVAL
from baremetal_service.conductor.token_purge import DEFAULT_RETENTION, TokenPurge
from baremetal_service.db.api import CreatedBefore, Database, IfMatchArg, public, utcnow
from baremetal_service.db.etags import make_generator
from baremetal_service.drivers import POWER_TARGETS, DriverError, DriverRegistry, HardwareType, Task
from baremetal_service.objects.allocations import AllocationService
from baremetal_service.objects.catalog import declarations
from baremetal_service.objects.conductors import ConductorRegistry
from baremetal_service.objects.crud import Crud
from baremetal_service.objects.nodes import NodeFeatures, check_provision, node_change_rules
from baremetal_service.objects.runbooks import RunbookService
from baremetal_service.values import check_name as _check_name
from baremetal_service.values import check_uuid as _check_uuid
from baremetal_service.values import json_copy

__all__ = ["BaremetalService", "NODE_UPDATABLE"]

#: Node fields a create or update may set (Ironic's patchable fields that we store).
NODE_UPDATABLE: Final = frozenset({
    "automated_clean", "bios_interface", "boot_interface", "chassis_uuid", "conductor_group",
    "console_interface", "deploy_interface", "description", "disable_power_off", "driver",
    "driver_info", "extra", "firmware_interface", "inspect_interface", "instance_info",
    "instance_name", "instance_uuid", "lessee", "maintenance", "maintenance_reason",
    "management_interface", "name", "network_data", "network_interface", "owner", "parent_node",
    "power_interface", "properties", "protected", "protected_reason", "raid_interface",
    "rescue_interface", "resource_class", "retired", "retired_reason", "shard",
    "storage_interface", "vendor_interface",
})  # fmt: skip
NODE_CREATABLE: Final = NODE_UPDATABLE | {"uuid"}
#: UPDATE conditions: no conductor lease / no lease and no queued work.
_UNRESERVED: Final = {"reservation": None}
_IDLE: Final = {"reservation": None, "pending_action": None}
#: How long a request waits for the action running on its node to end before it is answered
#: 409 NodeLocked (Ironic tries a locked node 3 times, 1 s apart) and how often it looks.
NODE_LOCKED_WAIT: Final = 2.0
NODE_LOCKED_POLL: Final = 0.05
RESOURCE_CLASS_RE: Final = re.compile(r"^CUSTOM_[A-Z0-9_]+\Z")
RESOURCE_CLASS_MAX_LENGTH: Final = 255
_VALIDATE_INTERFACES: Final = (
    "bios", "boot", "console", "deploy", "firmware", "inspect", "management", "network", "power",
    "raid", "rescue", "storage",
)  # fmt: skip


def _check_keys(kind: str, values: Mapping[str, Any], allowed: frozenset[str]) -> None:
    unknown = sorted(set(values) - allowed)
    if unknown:
        raise exc.InvalidParameterValue(
            f"Unknown or read-only {kind} field(s): {', '.join(unknown)}", fields=unknown
        )


# -- tenancy: Ironic's default policy for project-scoped callers --------------------------------

CREATE_OTHER_OWNER: Final = (
    "Cannot create a node as a project scoped admin with an owner other than your own project."
)


def _check_node_tenancy(
    current: Mapping[str, Any], wanted: Mapping[str, Any], project_id: str | None
) -> None:
    """``baremetal:node:update:owner`` (system only) and ``...:lessee`` (owner only)."""
    if project_id is None:
        return
    changed = {k for k in ("owner", "lessee") if k in wanted and wanted[k] != current.get(k)}
    if "owner" in changed:
        raise exc.PolicyForbidden("baremetal:node:update:owner")
    if "lessee" in changed and current.get("owner") != project_id:
        raise exc.PolicyForbidden("baremetal:node:update:lessee")


def _require_owner(owner: Any, project_id: str | None, rule: str) -> None:
    """A scoped caller that sees a node without owning it (its lessee) may not do *rule*."""
    if project_id is not None and owner != project_id:
        raise exc.PolicyForbidden(rule)


def etag_ignored_fields() -> dict[str, frozenset[str]]:
    """Data-API kind -> the fields its etag leaves out, from the resource declarations."""
    return {d.store_kind: d.etag_ignored for d in declarations() if not d.read_only}


class BaremetalService:
    """The domain facade (see the module docstring for the whole API)."""

    def __init__(
        self,
        database_url: str,
        *,
        etag_key: str | bytes | None = None,
        etag_generator: ETagGenerator | None = None,
        enabled_hardware_types: Iterable[str] = ("fake-hardware",),
        extra_hardware_types: Iterable[HardwareType] = (),
        conductor_workers: int = 1,
        conductor_name: str | None = None,
        poll_interval: float = 0.2,
        lease_timeout: float = 120.0,
        step_timeout: float = 60.0,
        migrate: bool = True,
        pool_size: int = 10,
        token_purge_interval: float = DEFAULT_PURGE_INTERVAL,
        token_retention: float = DEFAULT_RETENTION,
    ) -> None:
        self.db = Database(
            database_url,
            etag_generator=etag_generator or make_generator(etag_key, etag_ignored_fields()),
            pool_size=pool_size,
        )
        try:
            if migrate:
                self.db.upgrade()
                self.db.backfill_etags()
            self.drivers = DriverRegistry(enabled_hardware_types, extra=extra_hardware_types)
            self.conductor = Conductor(
                self.db,
                self.drivers,
                name=conductor_name,
                workers=max(1, conductor_workers),
                poll_interval=poll_interval,
                lease_timeout=lease_timeout,
                step_timeout=step_timeout,
            )
            if conductor_workers > 0:
                self.conductor.start()
            #: the generic CRUD of every declared resource, by kind (:mod:`baremetal_service.objects.crud`)
            self.crud: dict[str, Crud] = {
                d.kind: Crud(self, d) for d in declarations() if not d.own_controller
            }
            #: behaviour beyond CRUD: the allocation process, runbook traits, conductors
            self.allocations = AllocationService(self)
            self.runbooks = RunbookService(self)
            self.conductors = ConductorRegistry(self.db, self.drivers.host, self.drivers.names())
            #: recorded client tokens older than *token_retention* are purged where the
            #: conductor runs (:mod:`baremetal_service.conductor.token_purge`)
            self.token_purge = TokenPurge(self.db, interval=token_purge_interval, retention=token_retention)
            if conductor_workers > 0:
                self.conductors.start()  # the heartbeat: alive while the workers run
                self.token_purge.start()
            #: traits, VIFs, virtual media, firmware (:mod:`baremetal_service.objects.nodes`)
            self.node_features = NodeFeatures(self)
        except BaseException:
            self.db.dispose()
            raise

    @property
    def etag_generator(self) -> ETagGenerator:
        return self.db.etag_generator

    def close(self) -> None:
        self.conductor.stop()
        self.conductors.stop()
        self.token_purge.stop()
        self.allocations.close()
        self.db.dispose()

    def __enter__(self) -> BaremetalService:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    # -- helpers ------------------------------------------------------------------------

    def node_out(self, doc: Mapping[str, Any]) -> dict[str, Any]:
        """The public document of the stored node *doc*, with the conductor serving it."""
        out = public(doc)
        out["conductor"] = self.drivers.host
        return out

    def secret_fields(self, driver: str) -> frozenset[str]:
        """driver_info keys the API must mask for nodes of *driver* (declared by the driver)."""
        return self.drivers.secret_fields(driver)

    # -- nodes --------------------------------------------------------------------------

    def create_node(
        self, values: Mapping[str, Any], *, project_id: str | None = None, token: Any = None
    ) -> dict[str, Any]:
        before = self.db.created_before("node", token)  # a retry: before any check (as a replay)
        if before is not None:
            return self.node_out(before)
        values = dict(values)
        initial = values.pop("_initial_state", states.ENROLL)
        if initial not in (states.ENROLL, states.AVAILABLE):
            raise exc.InvalidParameterValue(f"Invalid initial provision state {initial!r}")
        _check_keys("node", values, NODE_CREATABLE)
        if project_id is not None and values.get("owner") not in (None, project_id):
            raise exc.InvalidParameterValue(CREATE_OTHER_OWNER)
        if "driver" not in values or not isinstance(values["driver"], str):
            raise exc.InvalidParameterValue("Missing mandatory parameter: driver")
        hw = self.drivers.for_node(values["driver"])
        self.drivers.check_interfaces(values["driver"], values)
        if "uuid" in values:
            values["uuid"] = _check_uuid("uuid", values["uuid"])
        _check_name("node", values.get("name"))
        if values.get("instance_uuid") is not None:
            values["instance_uuid"] = _check_uuid("instance_uuid", values["instance_uuid"])
        row = {**hw.interface_names, **{k: v for k, v in values.items() if v is not None}}
        for key in ("chassis_uuid", "description", "name", "resource_class", "automated_clean"):
            if key in values:
                row[key] = values[key]
        if project_id is not None:
            row["owner"] = project_id
        if not row.get("maintenance"):
            row.pop("maintenance_reason", None)
        row["provision_state"] = initial
        row["conductor_group"] = row.get("conductor_group") or ""
        try:
            doc = self.db.insert("node", row, project_id=None, token=token)
        except CreatedBefore as before:  # an earlier execution of this request made it
            doc = before.doc
        return self.node_out(doc)

    def get_node(self, ident: str, *, project_id: str | None = None) -> dict[str, Any]:
        doc = self.db.get("node", ident, project_id=project_id, internal=False)
        doc["conductor"] = self.drivers.host
        return doc

    def list_nodes(
        self,
        *,
        project_id: str | None = None,
        filters: Mapping[str, Any] | None = None,
        limit: int | None = None,
        marker: str | None = None,
        sort_key: str = "id",
        sort_dir: str = "asc",
        fields: Iterable[str] | None = None,
    ) -> list[dict[str, Any]]:
        wanted = dict(filters or {})
        conductor = wanted.pop("conductor", None)
        shown = None if fields is None else set(fields)
        docs = self.db.list_nodes(
            filters=wanted, project_id=project_id, limit=limit, marker=marker,
            sort_key=sort_key, sort_dir=sort_dir, fields=shown, internal=False,
        )  # fmt: skip
        host = self.drivers.host
        if conductor is not None and conductor != host:
            return []  # every node is managed by this service's one conductor
        if shown is None or "conductor" in shown:  # (a narrowed list has only what it shows)
            for doc in docs:
                doc["conductor"] = host
        return docs

    def _node_changes(self, current: dict[str, Any], changes: Mapping[str, Any]) -> dict[str, Any]:
        """Validate a node change set against the current node; returns what to write."""
        _check_keys("node", changes, NODE_UPDATABLE)
        out = {k: v for k, v in changes.items() if current.get(k) != v}
        if not out:
            return {}
        if current.get("reservation"):
            raise exc.NodeLocked(current["uuid"], current["reservation"])
        driver = out.get("driver", current["driver"])
        if not isinstance(driver, str):
            raise exc.InvalidParameterValue("The driver of a node must be a string")
        defaults = self.drivers.for_node(driver).interface_names
        if "driver" in out:
            for key, name in defaults.items():
                out.setdefault(key, name)
        for key, name in defaults.items():
            if key in out and out[key] is None:  # removing an interface resets it to the default
                out[key] = name
        self.drivers.check_interfaces(driver, out)
        if "name" in out:
            _check_name("node", out["name"])
        if out.get("instance_uuid") is not None:
            out["instance_uuid"] = _check_uuid("instance_uuid", out["instance_uuid"])
            if current.get("instance_uuid") not in (None, out["instance_uuid"]):
                raise exc.NodeAssociated(current["uuid"], current["instance_uuid"])
        if out.get("maintenance") is False:
            out.setdefault("maintenance_reason", None)
        for key in ("driver_info", "properties", "extra", "instance_info", "network_data"):
            if key in out and out[key] is None:
                out[key] = {}
        for key in ("maintenance", "protected", "retired", "disable_power_off"):
            if key in out and out[key] is None:
                out[key] = False
        if "conductor_group" in out and out["conductor_group"] is None:
            out["conductor_group"] = ""
        return node_change_rules(current, out)

    def update_node(
        self,
        ident: str,
        changes: Mapping[str, Any] | Callable[[dict[str, Any]], Mapping[str, Any]],
        *,
        project_id: str | None = None,
        if_match: IfMatchArg = None,
    ) -> dict[str, Any]:
        #: what *changes* gave for the document the tenancy check saw: ``(document, wanted)``
        computed: list[tuple[dict[str, Any], Mapping[str, Any]]] = []

        def mutate(current: dict[str, Any]) -> dict[str, Any]:
            if not callable(changes):
                wanted = changes
            else:
                node = public(current)
                # the same document as the tenancy check read: the same answer
                same = bool(computed) and computed[0][0] == node
                wanted = computed[0][1] if same else changes(json_copy(node))
            _check_node_tenancy(current, wanted, project_id)
            return self._node_changes(current, wanted)

        def authorize(current: dict[str, Any]) -> None:
            # Only the tenancy verdict: any other error comes from the write, in its usual order.
            if not callable(changes):
                _check_node_tenancy(current, changes, project_id)
                return
            node = public(current)
            try:
                wanted = changes(json_copy(node))
            except exc.PolicyForbidden:
                raise
            except HTTPProblem:
                return
            computed.append((node, wanted))
            _check_node_tenancy(current, wanted, project_id)

        self._authorize("node", ident, project_id, authorize)
        doc = self.db.update(
            "node", ident, mutate, if_match=if_match, project_id=project_id,
            match=_UNRESERVED, on_conflict=self.refuse_locked,
        )  # fmt: skip
        return self.node_out(doc)

    def _authorize(
        self, kind: str, ident: str, project_id: str | None, check: Callable[[dict[str, Any]], None]
    ) -> None:
        """A scoped caller's tenancy *check* on the current document, before the write.

        So a denied write is 403 whatever its If-Match says (403 wins over 412).  The
        write runs the same check again on the document it changes (authoritative).
        """
        if project_id is not None:
            check(self.db.get(kind, ident, project_id=project_id))

    @staticmethod
    def refuse_locked(current: Mapping[str, Any]) -> None:
        """:class:`~baremetal_service.exceptions.NodeLocked` when the node *current* is reserved."""
        if current.get("reservation"):
            raise exc.NodeLocked(current["uuid"], current["reservation"])

    @staticmethod
    def _busy(current: Mapping[str, Any], host: str) -> None:
        if current.get("reservation") or current.get("pending_action"):
            raise exc.NodeLocked(current["uuid"], current.get("reservation") or host)

    def delete_node(self, ident: str, *, project_id: str | None = None, if_match: IfMatchArg = None) -> None:
        def owner_only(current: dict[str, Any]) -> None:
            _require_owner(current.get("owner"), project_id, "baremetal:node:delete")

        def check(current: dict[str, Any]) -> None:
            owner_only(current)
            self._busy(current, self.conductor.name)
            state = current["provision_state"]
            if state not in exc.DELETE_ALLOWED_STATES and not current["maintenance"]:
                raise exc.NodeDeleteForbidden(current["uuid"], state)
            if current.get("protected"):
                raise exc.NodeProtected(current["uuid"])
            if current.get("instance_uuid"):
                raise exc.NodeAssociated(current["uuid"], current["instance_uuid"])

        self._authorize("node", ident, project_id, owner_only)
        self.db.delete(
            "node", ident, check=check, if_match=if_match, project_id=project_id,
            match=_IDLE,
            on_conflict=lambda cur: self._busy(cur, self.conductor.name),
        )  # fmt: skip

    # -- node states --------------------------------------------------------------------

    def set_provision_state(
        self,
        ident: str,
        target: str,
        *,
        project_id: str | None = None,
        clean_steps: list[dict[str, Any]] | None = None,
        if_match: IfMatchArg = None,
    ) -> dict[str, Any]:
        def mutate(current: dict[str, Any]) -> dict[str, Any]:
            uuid, state = current["uuid"], current["provision_state"]
            if not states.can_do(state, target):
                raise exc.InvalidStateRequested(target, uuid, state, states.allowed_actions(state))
            self._busy(current, self.conductor.name)
            check_provision(current, target)
            if current.get("protected") and target in ("deleted", "rebuild"):
                raise exc.NodeProtected(uuid)
            if current["maintenance"] and target in ("active", "rebuild"):
                raise exc.NodeInMaintenance("provisioning", uuid)
            if target == "clean" and not clean_steps:
                raise exc.InvalidParameterValue(
                    '"clean_steps" is required when setting target provision state to clean'
                )
            new_state = states.next_state(state, states.ACTIONS[target])
            assert new_state is not None  # noqa: S101 - can_do said so
            now = utcnow()
            out: dict[str, Any] = {
                "provision_state": new_state,
                "provision_updated_at": now,
                "last_error": None,
                "target_provision_state": states.target_of(new_state, target),
            }
            if not states.is_stable(new_state):
                out["pending_action"] = PENDING_PROVISION + target
            if target == "clean":
                dii = dict(current.get("driver_internal_info") or {})
                dii["clean_steps"] = list(clean_steps or [])
                out["driver_internal_info"] = dii
            if target == "inspect":
                out["inspection_started_at"] = now
                out["inspection_finished_at"] = None
            return out

        return self._start_action(ident, mutate, "provision_set", project_id=project_id, if_match=if_match)

    def wait_idle(self, ident: str, *, project_id: str | None = None) -> dict[str, Any]:
        """The node once no action runs on it, or as it is after :data:`NODE_LOCKED_WAIT`
        seconds (a busy node is then the caller's 409): an action on a fake node ends at once,
        so a request right after it finds the node as Ironic's lock retries would."""
        deadline = time.monotonic() + NODE_LOCKED_WAIT
        while True:
            node = self.db.get("node", ident, project_id=project_id)
            if not (node.get("reservation") or node.get("pending_action")) or time.monotonic() >= deadline:
                return node
            time.sleep(NODE_LOCKED_POLL)

    def _start_action(
        self,
        ident: str,
        mutate: Callable[[dict[str, Any]], dict[str, Any]],
        event: str,
        *,
        project_id: str | None,
        if_match: IfMatchArg,
    ) -> dict[str, Any]:
        """Record an action the conductor carries out (``baremetal.node.<event>.start``), on an
        idle node only (a busy one is a 409, after :meth:`wait_idle`), and wake the conductor."""
        self.wait_idle(ident, project_id=project_id)
        doc = self.db.update(
            "node", ident, mutate, if_match=if_match, project_id=project_id,
            event_type=f"baremetal.node.{event}.start",
            match=_IDLE,
            on_conflict=lambda cur: self._busy(cur, self.conductor.name),
        )  # fmt: skip
        self.conductor.wake()
        return self.node_out(doc)

    def set_power_state(
        self,
        ident: str,
        target: str,
        *,
        project_id: str | None = None,
        timeout: int | None = None,
        if_match: IfMatchArg = None,
    ) -> dict[str, Any]:
        if target not in POWER_TARGETS:
            raise exc.InvalidParameterValue(
                f"Invalid power state target {target!r}; valid targets are: {', '.join(POWER_TARGETS)}"
            )
        if timeout is not None and (not isinstance(timeout, int) or timeout < 1):
            raise exc.InvalidParameterValue(f"Invalid power timeout {timeout!r}: a positive integer")

        def mutate(current: dict[str, Any]) -> dict[str, Any]:
            self._busy(current, self.conductor.name)
            dii = dict(current.get("driver_internal_info") or {})
            if timeout is not None:
                dii["power_timeout"] = timeout
            return {
                "target_power_state": target,
                "pending_action": PENDING_POWER + target,
                "driver_internal_info": dii,
                "last_error": None,
            }

        return self._start_action(ident, mutate, "power_set", project_id=project_id, if_match=if_match)

    def set_maintenance(
        self,
        ident: str,
        on: bool,
        reason: str | None = None,
        *,
        project_id: str | None = None,
        if_match: IfMatchArg = None,
    ) -> dict[str, Any]:
        def mutate(current: dict[str, Any]) -> dict[str, Any]:
            if on:
                return {"maintenance": True, "maintenance_reason": reason}
            return {"maintenance": False, "maintenance_reason": None, "fault": None}

        doc = self.db.update(
            "node", ident, mutate, if_match=if_match, project_id=project_id,
            event_type="baremetal.node.maintenance_set.end",
        )  # fmt: skip
        return self.node_out(doc)

    def validate_node(self, ident: str, *, project_id: str | None = None) -> dict[str, Any]:
        """Ironic's ``GET /v1/nodes/{id}/validate`` document."""
        node = self.db.get("node", ident, project_id=project_id)
        hw = self.drivers.for_node(node["driver"])
        task = Task(node=node, driver_internal_info=dict(node.get("driver_internal_info") or {}))

        def power(t: Task) -> None:
            hw.validate_driver_info(t)
            hw.power.validate(t)

        def management(t: Task) -> None:
            hw.validate_driver_info(t)
            hw.management.validate(t)

        checks: dict[str, Callable[[Task], None]] = {
            "power": power,
            "management": management,
            "deploy": hw.deploy.validate,
            "boot": hw.deploy.validate,
            "inspect": hw.inspect.validate,
        }
        names = hw.interface_names
        result: dict[str, Any] = {}
        for kind in _VALIDATE_INTERFACES:
            check = checks.get(kind)
            if check is None:
                name = names.get(f"{kind}_interface", "")
                if name.startswith("no-"):
                    result[kind] = {"result": None, "reason": f"not supported ({name})"}
                else:
                    result[kind] = {"result": True}
                continue
            try:
                check(task)
                result[kind] = {"result": True}
            except DriverError as error:
                result[kind] = {"result": False, "reason": str(error)}
        return result

    def wait_for_idle(
        self, ident: str, *, timeout: float = 10.0, project_id: str | None = None
    ) -> dict[str, Any]:
        """Poll until the node has no queued work (tests, CLI helpers); returns the node."""
        deadline = time.monotonic() + timeout
        while True:
            doc = self.db.get("node", ident, project_id=project_id)
            if doc["pending_action"] is None and doc["reservation"] is None:
                return self.node_out(doc)
            if time.monotonic() > deadline:
                raise TimeoutError(f"node {ident} still busy after {timeout}s")
            time.sleep(0.01)

    # -- the declared resources -------------------------------------------------------

    def resource(self, kind: str) -> Crud:
        """The generic CRUD of a declared resource (``service.resource("port").create(...)``)."""
        return self.crud[kind]

    # -- resource classes ---------------------------------------------------------------

    @staticmethod
    def validate_resource_class_name(name: str) -> None:
        if (
            not isinstance(name, str)
            or len(name) > RESOURCE_CLASS_MAX_LENGTH
            or not RESOURCE_CLASS_RE.match(name)
        ):
            raise exc.InvalidResourceClassName(str(name)[:300])

    def ensure_resource_class(self, name: str) -> bool:
        """Idempotent create: ``True`` if created now (201), ``False`` if it existed (204)."""
        self.validate_resource_class_name(name)
        return self.db.ensure_resource_class(name, must_create=False)

    def create_resource_class(self, name: str) -> dict[str, Any]:
        """``POST /resource_classes``: 409 if it exists."""
        self.validate_resource_class_name(name)
        self.db.ensure_resource_class(name, must_create=True)
        return self.db.get_resource_class(name)

    def get_resource_class(self, name: str) -> dict[str, Any]:
        return self.db.get_resource_class(name)

    def list_resource_classes(self) -> list[dict[str, Any]]:
        return self.db.list_resource_classes()

    def delete_resource_class(self, name: str) -> None:
        self.db.delete_resource_class(name)

    # -- drivers ------------------------------------------------------------------------

    def list_drivers(self) -> list[dict[str, Any]]:
        return [self.drivers.describe(name) for name in self.drivers.names()]

    def get_driver(self, name: str) -> dict[str, Any]:
        return self.drivers.describe(name)

    def driver_properties(self, name: str) -> dict[str, str]:
        return self.drivers.properties(name)

    # -- events -------------------------------------------------------------------------

    def list_events(self, *, resource_uuid: str | None = None, limit: int = 100) -> list[dict[str, Any]]:
        return self.db.list_events(resource_uuid=resource_uuid, limit=limit)
