"""Node features: traits, VIFs, virtual media, firmware components, retirement, instance names.

Only traits need storage: ``nodes.traits``, a JSON list (JSONB on PostgreSQL),
``[]`` for existing rows.  Retirement and instance names use columns of 0001;
VIFs, virtual media and firmware components keep no state with the fake drivers.

Revision ID: 0003
Revises: 0002
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from baremetal_service.db.migrations.columns import JSON_TYPE

revision = "0003"
down_revision = "0002"


def upgrade() -> None:
    with op.batch_alter_table("nodes") as batch:
        batch.add_column(sa.Column("traits", JSON_TYPE, nullable=False, server_default=sa.text("'[]'")))


def downgrade() -> None:
    with op.batch_alter_table("nodes") as batch:
        batch.drop_column("traits")
