"""Add the etag column to nodes, ports, portgroups, chassis and node_events.

The ironic-etag spec's first work item: "Implement database migration, adding an
internal etag field to all top-level resources."  The column is nullable: rows that
existed before this migration get their etag computed by the service at startup
(``BaremetalService`` backfills ``etag IS NULL`` rows through the one etag function),
so the etag algorithm lives in one place and not in a frozen migration.

Revision ID: 0002
Revises: 0001
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None

#: "W/" + quoted 128 hex digits is 132 characters (the spec's 130 forgot the quotes).
ETAG_LENGTH = 140
TABLES = ("nodes", "ports", "portgroups", "chassis", "node_events")


def upgrade() -> None:
    for table in TABLES:
        with op.batch_alter_table(table) as batch:
            batch.add_column(sa.Column("etag", sa.String(length=ETAG_LENGTH), nullable=True))


def downgrade() -> None:
    for table in TABLES:
        with op.batch_alter_table(table) as batch:
            batch.drop_column("etag")
