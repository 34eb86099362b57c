"""Node history (microversion 1.78): Ironic's ``node_history`` table.

Shaped as ``db/models_node_history.py`` declares it (a test compares the two).

Revision ID: 0007
Revises: 0005
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "node_history",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("uuid", sa.String(length=36), nullable=False),
        sa.Column("node_id", sa.Integer(), nullable=False),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.Column("severity", sa.String(length=255), nullable=False),
        sa.Column("event_type", sa.String(length=255), nullable=False),
        sa.Column("event", sa.Text(), nullable=False),
        sa.Column("conductor", sa.String(length=255), nullable=True),
        sa.Column("user", sa.String(length=64), nullable=True),
        sa.Column("project", sa.String(length=64), nullable=True),
        sa.Column("state", sa.String(length=15), nullable=True),
        sa.Column("target_provision_state", sa.String(length=15), nullable=True),
        sa.Column("duration_seconds", sa.Integer(), nullable=True),
        sa.ForeignKeyConstraint(["node_id"], ["nodes.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("uuid", name="uniq_node_history0uuid"),
    )
    with op.batch_alter_table("node_history") as batch:
        batch.create_index("node_history_node_id_idx", ["node_id"], unique=False)


def downgrade() -> None:
    op.drop_table("node_history")
