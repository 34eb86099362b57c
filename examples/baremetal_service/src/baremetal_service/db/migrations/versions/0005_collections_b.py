"""Volume connectors and targets (microversion 1.32), inspection rules (1.96).

Tables ``volume_connectors``, ``volume_targets`` and ``inspection_rules``, shaped as
``db/models_collections_b.py`` declares them (a test compares the two).

Revision ID: 0005
Revises: 0004
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None

JSON_TYPE = sa.JSON().with_variant(postgresql.JSONB(), "postgresql")
ETAG_LENGTH = 140


def _common_tail() -> list[sa.Column[object]]:
    return [
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.Column("updated_at", sa.DateTime(), nullable=True),
        sa.Column("etag", sa.String(length=ETAG_LENGTH), nullable=True),
    ]


def upgrade() -> None:
    op.create_table(
        "volume_connectors",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("uuid", sa.String(length=36), nullable=False),
        sa.Column("node_id", sa.Integer(), nullable=False),
        sa.Column("type", sa.String(length=32), nullable=False),
        sa.Column("connector_id", sa.String(length=255), nullable=False),
        sa.Column("extra", JSON_TYPE, nullable=False),
        *_common_tail(),
        sa.ForeignKeyConstraint(["node_id"], ["nodes.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("uuid", name="uniq_volume_connectors0uuid"),
        sa.UniqueConstraint("type", "connector_id", name="uniq_volume_connectors0type0connector_id"),
    )
    with op.batch_alter_table("volume_connectors") as batch:
        batch.create_index("volume_connectors_node_id_idx", ["node_id"], unique=False)

    op.create_table(
        "volume_targets",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("uuid", sa.String(length=36), nullable=False),
        sa.Column("node_id", sa.Integer(), nullable=False),
        sa.Column("volume_type", sa.String(length=64), nullable=False),
        sa.Column("properties", JSON_TYPE, nullable=False),
        sa.Column("boot_index", sa.Integer(), nullable=False),
        sa.Column("volume_id", sa.String(length=36), nullable=False),
        sa.Column("extra", JSON_TYPE, nullable=False),
        *_common_tail(),
        sa.ForeignKeyConstraint(["node_id"], ["nodes.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("uuid", name="uniq_volume_targets0uuid"),
        sa.UniqueConstraint("boot_index", "node_id", name="uniq_volume_targets0boot_index0node_id"),
    )
    with op.batch_alter_table("volume_targets") as batch:
        batch.create_index("volume_targets_node_id_idx", ["node_id"], unique=False)

    op.create_table(
        "inspection_rules",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("uuid", sa.String(length=36), nullable=False),
        sa.Column("priority", sa.Integer(), nullable=False),
        sa.Column("description", sa.String(length=255), nullable=True),
        sa.Column("sensitive", sa.Boolean(), nullable=False),
        sa.Column("phase", sa.String(length=16), nullable=False),
        sa.Column("conditions", JSON_TYPE, nullable=False),
        sa.Column("actions", JSON_TYPE, nullable=False),
        *_common_tail(),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("uuid", name="uniq_inspection_rules0uuid"),
    )
    with op.batch_alter_table("inspection_rules") as batch:
        batch.create_index("inspection_rules_phase_idx", ["phase"], unique=False)


def downgrade() -> None:
    op.drop_table("inspection_rules")
    op.drop_table("volume_targets")
    op.drop_table("volume_connectors")
