"""What a resource declaration says: :class:`Resource`.

A :class:`Resource` says everything the generic machinery needs to serve a
resource: its fields in Ironic's order and the microversion each appears in
(:class:`baremetal_service.versions.Fields`), its URL path (kind + "s" unless said),
which fields a client may set on create only (write-once) or change later (updatable;
every other field is read-only), its JSON schema, the fields its etag ignores, its owner
scoping, its relations (``node_uuid`` -> a node, by name or UUID), its list filters
(boolean ones apart) with their versions, its sort keys, and optional hooks (normalise
values, checks before a create, update or delete, what to do after).  From it:

* :mod:`baremetal_service.objects.crud` implements create/get/list/update/delete over the
  data API for any declaration (etag stored and If-Match checked atomically in the
  write, events, tenant scoping);
* :mod:`baremetal_service.handlers.resources` serves the HTTP side: routes, per-version
  serialization and field hiding, validation, ``fields=``, paging, unknown query
  parameters (400);
* the etags leave out each declaration's ignored fields.

Each resource's module (``objects/ports.py``...) holds its declaration beside its rules
beyond CRUD (the declaration's hooks: allocation matching in ``objects/allocations.py``,
step normalisation in ``objects/deploy_templates.py``...); :mod:`.catalog` lists them all.
Nodes have their own controller and state machinery; their field table is declared the
same way (:data:`baremetal_service.objects.nodes.NODES`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final, Literal

from apimw import Version
from baremetal_service import versions

__all__ = ["DEFAULT_ETAG_IGNORED", "Resource", "Scope"]

#: ``node``: the resource belongs to a node and follows its tenancy (a project sees the
#: ones of the nodes it owns or leases, writes only on nodes it owns -- Ironic's policy
#: for ports, portgroups, volume connectors and targets); ``owner``: its own ``owner``
#: column (allocations); ``public``: its ``owner`` or ``public: true`` (runbooks);
#: ``system``: a project-scoped caller gets 403 (inspection rules); ``global``: no
#: scoping (chassis, deploy templates).
Scope = Literal["node", "owner", "public", "system", "global"]

DEFAULT_ETAG_IGNORED: Final = frozenset({"etag", "updated_at"})

#: A hook's (crud, ...) signature is documented on each attribute below.
Hook = Callable[..., Any]


@dataclass(frozen=True)
class Resource:
    """One resource, declared once (see the module docstring)."""

    # -- the wire (also read by the OpenAPI generator: keep these names) ----------------------
    kind: str  # "port"
    #: every field of a document, in Ironic's order, with the microversion it appears in
    fields: versions.Fields
    #: the fields a list shows without ``?detail`` or ``?fields``
    list_fields: tuple[str, ...]
    #: the JSON schema of a create body (a patched document must satisfy it too)
    create_schema: Mapping[str, Any]
    #: the fields a JSON Patch may touch
    patchable: tuple[str, ...]
    sort_keys: tuple[str, ...]
    #: the URL path under /v1/ ("" = kind + "s": "ports")
    collection: str = ""
    #: an item's identifier must be a UUID or a logical name (RFC 3986 unreserved characters),
    #: else a 400 "Expected UUID or name for <ident_name>: ..." (Ironic's, for ``port_ident``);
    #: "": any identifier is looked up
    ident_name: str = ""
    since: Version = versions.MIN_VERSION
    #: below :attr:`since` a write is a 405 "The API version does not allow <resources>" (Ironic's
    #: answer for allocations, deploy templates and runbooks), not the 404 of a route that does
    #: not exist yet (a read is a 404 either way)
    refuse_early_writes: bool = False
    sublinks: tuple[str, ...] = ()
    #: list query filters and the version each is accepted from
    filters: tuple[tuple[str, Version], ...] = ()
    #: boolean list query filters (``?maintenance=true``) and the version each is accepted from
    bool_filters: tuple[tuple[str, Version], ...] = ()
    #: the list's JSON key, when not the collection (``/v1/volume/connectors`` lists "connectors")
    list_key: str = ""
    #: ``?detail=`` is accepted from this version (``None``: never)
    detail_since: Version | None = versions.DETAIL_QUERY
    #: query parameter -> the CRUD's list keyword (``node_uuid`` -> ``node``)
    filter_kwargs: Mapping[str, str] = field(default_factory=dict)
    #: list query parameters Ironic accepts that have no effect here (not a 400)
    ignored_args: tuple[str, ...] = ()
    #: what an absent field shows, by field name (``{"steps": []}``)
    defaults: Mapping[str, Any] = field(default_factory=dict)
    #: the generic routes (list, ``/detail``, create, get, patch, delete) are served from the
    #: declaration; ``False`` when the resource's API module routes them itself
    routes: bool = True
    #: serve ``/<collection>/detail``
    detail_route: bool = True

    # -- the service ------------------------------------------------------------------------
    #: the data API's kind ("" = :attr:`kind`)
    store: str = ""
    #: the name in messages ("" = kind with spaces: "deploy template")
    label: str = ""
    #: fields a create or an update may set (``None``: :attr:`patchable`)
    updatable: frozenset[str] | None = None
    #: fields a create may set but no update may change (``uuid`` always is)
    write_once: frozenset[str] = frozenset()
    scope: Scope = "global"
    #: Ironic's policy prefix for 403s (``baremetal:port`` -> ``baremetal:port:update``)
    policy: str = ""
    #: body field -> the kind it references, given by UUID or name (400 when missing)
    relations: Mapping[str, str] = field(default_factory=dict)
    #: CRUD list keyword -> the document field it filters (a relation is resolved to its row)
    list_filters: Mapping[str, str] = field(default_factory=dict)
    #: status of a list filter naming a missing related resource (Ironic: 404, allocations 400)
    filter_not_found: int = 404
    #: a ``null`` written to these fields stores this value instead
    null_defaults: Mapping[str, Any] = field(default_factory=dict)
    #: fields the etag leaves out
    etag_ignored: frozenset[str] = DEFAULT_ETAG_IGNORED
    #: ``(values, creating) -> values``: canonical values (MAC lower case, steps...)
    normalise: Hook | None = None
    #: ``(crud, row, project_id) -> None``: checks before a create (may complete *row*)
    check_create: Hook | None = None
    #: ``(crud, current, changes, project_id) -> None``: checks of a non-empty change set
    #: against the current document, in the write's retry loop (may adjust *changes*)
    check_update: Hook | None = None
    #: ``(crud, current, project_id) -> None``: checks before a delete, in its retry loop
    check_delete: Hook | None = None
    #: ``(crud, doc, values, project_id) -> doc``: after the insert (start a process...)
    after_create: Hook | None = None
    #: ``(crud, doc) -> None``: after the delete (free a node...)
    after_delete: Hook | None = None
    #: ``doc -> doc``: the API's view of a stored document (hide sensitive fields)
    present: Hook | None = None
    #: fields :attr:`present` needs even when a list is narrowed to others
    present_needs: tuple[str, ...] = ()
    #: named conditions (:data:`baremetal_service.db.api.CONDITIONS`) an UPDATE / DELETE also
    #: carries, so the state they check cannot change between the check and the write
    update_conditions: tuple[str, ...] = ()
    delete_conditions: tuple[str, ...] = ()
    #: no create, update or delete (conductors)
    read_only: bool = False
    #: served by its own controller and service, not the generic ones (nodes, conductors):
    #: the declaration describes its fields, versions and filters
    own_controller: bool = False

    # -- derived ----------------------------------------------------------------------------

    def __post_init__(self) -> None:
        if not self.collection:
            object.__setattr__(self, "collection", self.kind + "s")

    @property
    def store_kind(self) -> str:
        return self.store or self.kind

    @property
    def name(self) -> str:
        return self.label or self.kind.replace("_", " ")

    @property
    def updatable_fields(self) -> frozenset[str]:
        return frozenset(self.patchable) if self.updatable is None else self.updatable

    @property
    def creatable_fields(self) -> frozenset[str]:
        return self.updatable_fields | self.write_once | {"uuid"}

    @property
    def read_only_fields(self) -> tuple[str, ...]:
        """Fields no client sets (``created_at``, ``links``, ``etag``...)."""
        settable = self.creatable_fields
        return tuple(f for f in self.fields.names if f not in settable)

    @property
    def scoped(self) -> bool:
        return self.scope != "global"
