"""Allocations, conductors, deploy templates, runbooks (tables as ``db/models.py`` declares them).

Revision ID: 0004
Revises: 0003
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from baremetal_service.db.migrations.columns import (
    create_resource_table,
    create_table,
    flag,
    json,
    node_fk,
    node_id,
    string,
    timestamps,
)

revision = "0004"
down_revision = "0003"


def upgrade() -> None:
    create_resource_table(
        "allocations",
        string("name"),
        node_id(nullable=True),
        string("state", 15, nullable=False),
        sa.Column("last_error", sa.Text(), nullable=True),
        string("resource_class", 80),
        json("traits"),
        json("candidate_nodes"),
        json("extra"),
        string("owner"),
        foreign_keys=[node_fk()],
        unique=["uuid", "name", "node_id"],
    )
    create_resource_table(
        "deploy_templates",
        string("name", nullable=False),
        string("description"),
        json("steps"),
        json("extra"),
        unique=["uuid", "name"],
    )
    create_resource_table(
        "runbooks",
        string("name", nullable=False),
        string("description"),
        json("steps"),
        json("traits"),
        json("extra"),
        flag("public"),
        string("owner"),
        flag("disable_ramdisk"),
        unique=["uuid", "name"],
    )
    create_table(
        "conductors",
        string("hostname", nullable=False),
        string("conductor_group", nullable=False),
        json("drivers"),
        flag("online"),
        *timestamps(),
        unique=["hostname"],
    )


def downgrade() -> None:
    for table in ("conductors", "runbooks", "deploy_templates", "allocations"):
        op.drop_table(table)
