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

from alembic import op

from baremetal_service.db.migrations.columns import etag

revision = "0002"
down_revision = "0001"

TABLES = ("nodes", "ports", "portgroups", "chassis", "node_events")


def upgrade() -> None:
    for table in TABLES:
        with op.batch_alter_table(table) as batch:
            batch.add_column(etag())


def downgrade() -> None:
    for table in TABLES:
        with op.batch_alter_table(table) as batch:
            batch.drop_column("etag")
