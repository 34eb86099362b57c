"""Node history (microversion 1.78): Ironic's ``node_history`` table.

Shaped as ``db/models.py`` declares it (a test compares the two).

Revision ID: 0007
Revises: 0005
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from baremetal_service.db.migrations.columns import create_table, created_at, node_fk, node_id, string, uuid

revision = "0007"
down_revision = "0005"


def upgrade() -> None:
    create_table(
        "node_history",
        uuid(),
        node_id(),
        created_at(),
        string("severity", nullable=False),
        string("event_type", nullable=False),
        sa.Column("event", sa.Text(), nullable=False),
        string("conductor"),
        string("user", 64),
        string("project", 64),
        string("state", 15),
        string("target_provision_state", 15),
        sa.Column("duration_seconds", sa.Integer(), nullable=True),
        node_fk(),
        unique=["uuid"],
        index=["node_id"],
    )


def downgrade() -> None:
    op.drop_table("node_history")
