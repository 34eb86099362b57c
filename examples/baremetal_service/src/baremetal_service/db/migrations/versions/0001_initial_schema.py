"""Initial schema: nodes, ports, portgroups, chassis, resource classes, node events.

The etag columns come in their own migration (0002), as the etag spec's work items say.

Revision ID: 0001
Revises:
Create Date: 2026-11-22 19:32:43.037675
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from baremetal_service.db.migrations.columns import (
    create_resource_table,
    create_table,
    created_at,
    flag,
    json,
    node_fk,
    node_id,
    string,
    timestamps,
    uuid,
)

revision = "0001"
down_revision = None

#: the driver interfaces a node names, one column each.
INTERFACES = (
    "bios",
    "boot",
    "console",
    "deploy",
    "firmware",
    "inspect",
    "management",
    "network",
    "power",
    "raid",
    "rescue",
    "storage",
    "vendor",
)


def upgrade() -> None:
    create_resource_table(
        "chassis",
        string("description"),
        json("extra"),
        with_etag=False,
        unique=["uuid"],
    )
    create_table(
        "node_events",
        string("event_type", 64, nullable=False),
        string("resource_type", 16, nullable=False),
        uuid("resource_uuid"),
        json("payload"),
        created_at(),
        index=["resource_uuid"],
    )
    create_table(
        "resource_classes",
        string("name", nullable=False),
        *timestamps(),
        unique=["name"],
    )
    create_resource_table(
        "nodes",
        string("name"),
        sa.Column("description", sa.Text(), nullable=True),
        string("driver", nullable=False),
        json("driver_info"),
        json("driver_internal_info"),
        json("properties"),
        json("extra"),
        json("instance_info"),
        uuid("instance_uuid", nullable=True),
        string("resource_class", 80),
        sa.Column("chassis_id", sa.Integer(), nullable=True),
        string("provision_state", 15, nullable=False),
        string("target_provision_state", 15),
        string("power_state", 15),
        string("target_power_state", 15),
        sa.Column("provision_updated_at", sa.DateTime(), nullable=True),
        sa.Column("inspection_started_at", sa.DateTime(), nullable=True),
        sa.Column("inspection_finished_at", sa.DateTime(), nullable=True),
        sa.Column("last_error", sa.Text(), nullable=True),
        flag("maintenance"),
        sa.Column("maintenance_reason", sa.Text(), nullable=True),
        json("clean_step"),
        json("deploy_step"),
        string("owner"),
        string("lessee"),
        string("conductor_group", nullable=False),
        flag("protected"),
        sa.Column("protected_reason", sa.Text(), nullable=True),
        flag("retired"),
        sa.Column("retired_reason", sa.Text(), nullable=True),
        flag("automated_clean", nullable=True),
        flag("disable_power_off"),
        flag("console_enabled"),
        string("instance_name"),
        json("network_data"),
        string("shard"),
        uuid("parent_node", nullable=True),
        string("fault"),
        string("boot_mode", 16),
        flag("secure_boot", nullable=True),
        json("raid_config"),
        json("target_raid_config"),
        json("service_step"),
        *(string(f"{interface}_interface") for interface in INTERFACES),
        string("reservation"),
        sa.Column("reserved_at", sa.DateTime(), nullable=True),
        string("pending_action", 64),
        foreign_keys=[sa.ForeignKeyConstraint(["chassis_id"], ["chassis.id"])],
        with_etag=False,
        unique=["instance_uuid", "name", "uuid"],
        index=["chassis_id", "driver", "pending_action", "provision_state", "resource_class"],
    )
    create_resource_table(
        "portgroups",
        string("name"),
        string("address", 18),
        node_id(),
        flag("standalone_ports_supported"),
        string("mode"),
        string("physical_network", 64),
        string("category"),
        flag("dynamic_portgroup"),
        json("properties"),
        json("internal_info"),
        json("extra"),
        foreign_keys=[node_fk()],
        with_etag=False,
        unique=["address", "name", "uuid"],
        index=["node_id"],
    )
    create_resource_table(
        "ports",
        string("address", 18, nullable=False),
        string("name"),
        string("description"),
        node_id(),
        sa.Column("portgroup_id", sa.Integer(), nullable=True),
        flag("pxe_enabled"),
        flag("is_smartnic"),
        string("physical_network", 64),
        string("vendor"),
        string("category"),
        flag("available_for_dynamic_portgroup"),
        json("local_link_connection"),
        json("internal_info"),
        json("extra"),
        foreign_keys=[node_fk(), sa.ForeignKeyConstraint(["portgroup_id"], ["portgroups.id"])],
        with_etag=False,
        unique=["address", "name", "uuid"],
        index=["node_id", "portgroup_id"],
    )


def downgrade() -> None:
    for table in ("ports", "portgroups", "nodes", "resource_classes", "node_events", "chassis"):
        op.drop_table(table)
