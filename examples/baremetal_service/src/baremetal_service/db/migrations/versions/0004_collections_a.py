"""Allocations, conductors, deploy templates, runbooks (helper-owned slot).

Revision ID: 0004
Revises: 0003
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None

JSON_TYPE = sa.JSON().with_variant(postgresql.JSONB(), "postgresql")
ETAG_LENGTH = 140


def upgrade() -> None:
    op.create_table(
        "allocations",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("uuid", sa.String(length=36), nullable=False),
        sa.Column("name", sa.String(length=255), nullable=True),
        sa.Column("node_id", sa.Integer(), nullable=True),
        sa.Column("state", sa.String(length=15), nullable=False),
        sa.Column("last_error", sa.Text(), nullable=True),
        sa.Column("resource_class", sa.String(length=80), nullable=True),
        sa.Column("traits", JSON_TYPE, nullable=False),
        sa.Column("candidate_nodes", JSON_TYPE, nullable=False),
        sa.Column("extra", JSON_TYPE, nullable=False),
        sa.Column("owner", sa.String(length=255), nullable=True),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.Column("updated_at", sa.DateTime(), nullable=True),
        sa.Column("etag", sa.String(length=ETAG_LENGTH), nullable=True),
        sa.ForeignKeyConstraint(["node_id"], ["nodes.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("uuid", name="uniq_allocations0uuid"),
        sa.UniqueConstraint("name", name="uniq_allocations0name"),
        sa.UniqueConstraint("node_id", name="uniq_allocations0node_id"),
    )
    op.create_table(
        "deploy_templates",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("uuid", sa.String(length=36), nullable=False),
        sa.Column("name", sa.String(length=255), nullable=False),
        sa.Column("description", sa.String(length=255), nullable=True),
        sa.Column("steps", JSON_TYPE, nullable=False),
        sa.Column("extra", JSON_TYPE, nullable=False),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.Column("updated_at", sa.DateTime(), nullable=True),
        sa.Column("etag", sa.String(length=ETAG_LENGTH), nullable=True),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("uuid", name="uniq_deploy_templates0uuid"),
        sa.UniqueConstraint("name", name="uniq_deploy_templates0name"),
    )
    op.create_table(
        "runbooks",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("uuid", sa.String(length=36), nullable=False),
        sa.Column("name", sa.String(length=255), nullable=False),
        sa.Column("description", sa.String(length=255), nullable=True),
        sa.Column("steps", JSON_TYPE, nullable=False),
        sa.Column("traits", JSON_TYPE, nullable=False),
        sa.Column("extra", JSON_TYPE, nullable=False),
        sa.Column("public", sa.Boolean(), nullable=False),
        sa.Column("owner", sa.String(length=255), nullable=True),
        sa.Column("disable_ramdisk", sa.Boolean(), nullable=False),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.Column("updated_at", sa.DateTime(), nullable=True),
        sa.Column("etag", sa.String(length=ETAG_LENGTH), nullable=True),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("uuid", name="uniq_runbooks0uuid"),
        sa.UniqueConstraint("name", name="uniq_runbooks0name"),
    )
    op.create_table(
        "conductors",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("hostname", sa.String(length=255), nullable=False),
        sa.Column("conductor_group", sa.String(length=255), nullable=False),
        sa.Column("drivers", JSON_TYPE, nullable=False),
        sa.Column("online", sa.Boolean(), nullable=False),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.Column("updated_at", sa.DateTime(), nullable=True),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("hostname", name="uniq_conductors0hostname"),
    )


def downgrade() -> None:
    for table in ("conductors", "runbooks", "deploy_templates", "allocations"):
        op.drop_table(table)
