"""Schema of the per-node features (migration 0003): the node's ``traits``.

Ironic keeps traits in a ``node_traits`` table; the wire shows them as one list
field of the node (``traits``, microversion 1.37) that changes the node like any
other field.  Here they are a JSON list column of ``nodes``, so a trait change is
an ordinary node write: one compare-and-swap UPDATE that also recomputes the
node's etag (traits are part of the etag'd document, as Ironic's fields are).

Appended to the declarative :class:`~.models.Node` (SQLAlchemy's documented way
of adding a column to an existing mapped class), so the ``nodes`` table and every
SELECT built from it know the column; migration 0003 adds it to the database.
VIFs, virtual media and firmware components keep no state of their own with the
fake hardware types (Ironic's ``noop`` network interface and ``fake`` drivers).
"""

from __future__ import annotations

from sqlalchemy import text
from sqlalchemy.orm import mapped_column

from .models import JSONType, Node

__all__ = ["TRAITS_SERVER_DEFAULT"]

#: Rows that predate the column get an empty list (the migration's server default too).
TRAITS_SERVER_DEFAULT = "'[]'"

if "traits" not in Node.__table__.c:
    Node.traits = mapped_column(  # type: ignore[attr-defined]
        "traits", JSONType, nullable=False, default=list, server_default=text(TRAITS_SERVER_DEFAULT)
    )
