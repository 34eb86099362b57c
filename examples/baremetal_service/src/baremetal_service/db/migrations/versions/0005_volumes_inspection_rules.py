"""Volume connectors and targets (microversion 1.32), inspection rules (1.96).

Tables ``volume_connectors``, ``volume_targets`` and ``inspection_rules``, shaped as
``db/models.py`` declares them (a test compares the two).

Revision ID: 0005
Revises: 0004
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from baremetal_service.db.migrations.columns import (
    create_resource_table,
    flag,
    json,
    node_fk,
    node_id,
    string,
    uuid,
)

revision = "0005"
down_revision = "0004"


def upgrade() -> None:
    create_resource_table(
        "volume_connectors",
        node_id(),
        string("type", 32, nullable=False),
        string("connector_id", nullable=False),
        json("extra"),
        foreign_keys=[node_fk()],
        unique=["uuid", ("type", "connector_id")],
        index=["node_id"],
    )
    create_resource_table(
        "volume_targets",
        node_id(),
        string("volume_type", 64, nullable=False),
        json("properties"),
        sa.Column("boot_index", sa.Integer(), nullable=False),
        uuid("volume_id"),
        json("extra"),
        foreign_keys=[node_fk()],
        unique=["uuid", ("boot_index", "node_id")],
        index=["node_id"],
    )
    create_resource_table(
        "inspection_rules",
        sa.Column("priority", sa.Integer(), nullable=False),
        string("description"),
        flag("sensitive"),
        string("phase", 16, nullable=False),
        json("conditions"),
        json("actions"),
        unique=["uuid"],
        index=["phase"],
    )


def downgrade() -> None:
    for table in ("inspection_rules", "volume_targets", "volume_connectors"):
        op.drop_table(table)
