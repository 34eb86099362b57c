"""The columns and table shape the migrations share.

Every table of the service has an integer ``id`` primary key, most a ``uuid``, JSON
documents (JSONB on PostgreSQL), ``created_at``/``updated_at`` and a nullable ``etag``;
unique constraints are named ``uniq_<table>0<column>[0<column>...]`` and indexes
``<table>_<column>_idx``.  The migrations build their tables from these pieces.

Frozen as the migrations are: a change here changes what every revision that uses
it builds, so a new shape gets a new helper, never an edit of an old one.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

__all__ = [
    "ETAG_LENGTH",
    "JSON_TYPE",
    "created_at",
    "create_resource_table",
    "create_table",
    "etag",
    "flag",
    "json",
    "node_fk",
    "node_id",
    "string",
    "timestamps",
    "uuid",
]

JSON_TYPE = sa.JSON().with_variant(postgresql.JSONB(), "postgresql")
#: "W/" + quoted 128 hex digits is 132 characters (the spec's 130 forgot the quotes).
ETAG_LENGTH = 140

Column = sa.Column[object]


def string(name: str, length: int = 255, *, nullable: bool = True) -> Column:
    return sa.Column(name, sa.String(length=length), nullable=nullable)


def uuid(name: str = "uuid", *, nullable: bool = False) -> Column:
    return string(name, 36, nullable=nullable)


def json(name: str) -> Column:
    """A JSON document column: never NULL (an empty document is ``{}`` or ``[]``)."""
    return sa.Column(name, JSON_TYPE, nullable=False)


def flag(name: str, *, nullable: bool = False) -> Column:
    return sa.Column(name, sa.Boolean(), nullable=nullable)


def created_at() -> Column:
    return sa.Column("created_at", sa.DateTime(), nullable=False)


def timestamps() -> list[Column]:
    return [created_at(), sa.Column("updated_at", sa.DateTime(), nullable=True)]


def etag() -> Column:
    return string("etag", ETAG_LENGTH)


def node_id(*, nullable: bool = False) -> Column:
    """The node a row belongs to (its foreign key: :func:`node_fk`)."""
    return sa.Column("node_id", sa.Integer(), nullable=nullable)


def node_fk() -> sa.ForeignKeyConstraint:
    """``node_id`` references ``nodes.id``; the rows go with their node."""
    return sa.ForeignKeyConstraint(["node_id"], ["nodes.id"], ondelete="CASCADE")


def create_table(
    name: str,
    *items: sa.schema.SchemaItem,
    unique: Sequence[str | tuple[str, ...]] = (),
    index: Sequence[str] = (),
) -> None:
    """Create table *name*: an ``id`` primary key, then *items* (columns, foreign keys).

    *unique*: the columns (or column tuples) of its named unique constraints;
    *index*: the columns that get a named index of their own.
    """
    op.create_table(
        name,
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        *items,
        sa.PrimaryKeyConstraint("id"),
        *(
            sa.UniqueConstraint(*cols, name=f"uniq_{name}0{'0'.join(cols)}")
            for cols in ((u,) if isinstance(u, str) else u for u in unique)
        ),
    )
    for column in index:
        op.create_index(f"{name}_{column}_idx", name, [column], unique=False)


def create_resource_table(
    name: str,
    *columns: Column,
    foreign_keys: Sequence[sa.ForeignKeyConstraint] = (),
    with_etag: bool = True,
    unique: Sequence[str | tuple[str, ...]] = (),
    index: Sequence[str] = (),
) -> None:
    """Create the table of an API resource: ``id``, ``uuid``, its own *columns*, then
    ``created_at``, ``updated_at`` and ``etag``, then its *foreign_keys*.

    *with_etag* False: the tables of 0001, whose ``etag`` came with 0002.  *unique* and
    *index* as for :func:`create_table`.
    """
    create_table(
        name,
        uuid(),
        *columns,
        *timestamps(),
        *([etag()] if with_etag else []),
        *foreign_keys,
        unique=unique,
        index=index,
    )
