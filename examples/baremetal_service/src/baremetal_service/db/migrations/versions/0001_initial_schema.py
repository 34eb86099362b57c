"""Initial schema: nodes, ports, portgroups, chassis, resource classes, node events.

The etag columns come in their own migration (0002), as the etag spec's work items say.

Revision ID: 0001
Revises:
Create Date: 2026-11-22 19:32:43.037675
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

JSON_TYPE = sa.JSON().with_variant(postgresql.JSONB(), "postgresql")

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "chassis",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("uuid", sa.String(length=36), nullable=False),
        sa.Column("description", sa.String(length=255), nullable=True),
        sa.Column("extra", JSON_TYPE, nullable=False),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.Column("updated_at", sa.DateTime(), nullable=True),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("uuid", name="uniq_chassis0uuid"),
    )
    op.create_table(
        "node_events",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("event_type", sa.String(length=64), nullable=False),
        sa.Column("resource_type", sa.String(length=16), nullable=False),
        sa.Column("resource_uuid", sa.String(length=36), nullable=False),
        sa.Column("payload", JSON_TYPE, nullable=False),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.PrimaryKeyConstraint("id"),
    )
    with op.batch_alter_table("node_events", schema=None) as batch_op:
        batch_op.create_index("node_events_resource_uuid_idx", ["resource_uuid"], unique=False)

    op.create_table(
        "resource_classes",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("name", sa.String(length=255), nullable=False),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.Column("updated_at", sa.DateTime(), nullable=True),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("name", name="uniq_resource_classes0name"),
    )
    op.create_table(
        "nodes",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("uuid", sa.String(length=36), nullable=False),
        sa.Column("name", sa.String(length=255), nullable=True),
        sa.Column("description", sa.Text(), nullable=True),
        sa.Column("driver", sa.String(length=255), nullable=False),
        sa.Column("driver_info", JSON_TYPE, nullable=False),
        sa.Column("driver_internal_info", JSON_TYPE, nullable=False),
        sa.Column("properties", JSON_TYPE, nullable=False),
        sa.Column("extra", JSON_TYPE, nullable=False),
        sa.Column("instance_info", JSON_TYPE, nullable=False),
        sa.Column("instance_uuid", sa.String(length=36), nullable=True),
        sa.Column("resource_class", sa.String(length=80), nullable=True),
        sa.Column("chassis_id", sa.Integer(), nullable=True),
        sa.Column("provision_state", sa.String(length=15), nullable=False),
        sa.Column("target_provision_state", sa.String(length=15), nullable=True),
        sa.Column("power_state", sa.String(length=15), nullable=True),
        sa.Column("target_power_state", sa.String(length=15), nullable=True),
        sa.Column("provision_updated_at", sa.DateTime(), nullable=True),
        sa.Column("inspection_started_at", sa.DateTime(), nullable=True),
        sa.Column("inspection_finished_at", sa.DateTime(), nullable=True),
        sa.Column("last_error", sa.Text(), nullable=True),
        sa.Column("maintenance", sa.Boolean(), nullable=False),
        sa.Column("maintenance_reason", sa.Text(), nullable=True),
        sa.Column("clean_step", JSON_TYPE, nullable=False),
        sa.Column("deploy_step", JSON_TYPE, nullable=False),
        sa.Column("owner", sa.String(length=255), nullable=True),
        sa.Column("lessee", sa.String(length=255), nullable=True),
        sa.Column("conductor_group", sa.String(length=255), nullable=False),
        sa.Column("protected", sa.Boolean(), nullable=False),
        sa.Column("protected_reason", sa.Text(), nullable=True),
        sa.Column("retired", sa.Boolean(), nullable=False),
        sa.Column("retired_reason", sa.Text(), nullable=True),
        sa.Column("automated_clean", sa.Boolean(), nullable=True),
        sa.Column("disable_power_off", sa.Boolean(), nullable=False),
        sa.Column("console_enabled", sa.Boolean(), nullable=False),
        sa.Column("instance_name", sa.String(length=255), nullable=True),
        sa.Column("network_data", JSON_TYPE, nullable=False),
        sa.Column("shard", sa.String(length=255), nullable=True),
        sa.Column("parent_node", sa.String(length=36), nullable=True),
        sa.Column("fault", sa.String(length=255), nullable=True),
        sa.Column("boot_mode", sa.String(length=16), nullable=True),
        sa.Column("secure_boot", sa.Boolean(), nullable=True),
        sa.Column("raid_config", JSON_TYPE, nullable=False),
        sa.Column("target_raid_config", JSON_TYPE, nullable=False),
        sa.Column("service_step", JSON_TYPE, nullable=False),
        sa.Column("bios_interface", sa.String(length=255), nullable=True),
        sa.Column("boot_interface", sa.String(length=255), nullable=True),
        sa.Column("console_interface", sa.String(length=255), nullable=True),
        sa.Column("deploy_interface", sa.String(length=255), nullable=True),
        sa.Column("firmware_interface", sa.String(length=255), nullable=True),
        sa.Column("inspect_interface", sa.String(length=255), nullable=True),
        sa.Column("management_interface", sa.String(length=255), nullable=True),
        sa.Column("network_interface", sa.String(length=255), nullable=True),
        sa.Column("power_interface", sa.String(length=255), nullable=True),
        sa.Column("raid_interface", sa.String(length=255), nullable=True),
        sa.Column("rescue_interface", sa.String(length=255), nullable=True),
        sa.Column("storage_interface", sa.String(length=255), nullable=True),
        sa.Column("vendor_interface", sa.String(length=255), nullable=True),
        sa.Column("reservation", sa.String(length=255), nullable=True),
        sa.Column("reserved_at", sa.DateTime(), nullable=True),
        sa.Column("pending_action", sa.String(length=64), nullable=True),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.Column("updated_at", sa.DateTime(), nullable=True),
        sa.ForeignKeyConstraint(
            ["chassis_id"],
            ["chassis.id"],
        ),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("instance_uuid", name="uniq_nodes0instance_uuid"),
        sa.UniqueConstraint("name", name="uniq_nodes0name"),
        sa.UniqueConstraint("uuid", name="uniq_nodes0uuid"),
    )
    with op.batch_alter_table("nodes", schema=None) as batch_op:
        batch_op.create_index("nodes_chassis_id_idx", ["chassis_id"], unique=False)
        batch_op.create_index("nodes_driver_idx", ["driver"], unique=False)
        batch_op.create_index("nodes_pending_action_idx", ["pending_action"], unique=False)
        batch_op.create_index("nodes_provision_state_idx", ["provision_state"], unique=False)
        batch_op.create_index("nodes_resource_class_idx", ["resource_class"], unique=False)

    op.create_table(
        "portgroups",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("uuid", sa.String(length=36), nullable=False),
        sa.Column("name", sa.String(length=255), nullable=True),
        sa.Column("address", sa.String(length=18), nullable=True),
        sa.Column("node_id", sa.Integer(), nullable=False),
        sa.Column("standalone_ports_supported", sa.Boolean(), nullable=False),
        sa.Column("mode", sa.String(length=255), nullable=True),
        sa.Column("physical_network", sa.String(length=64), nullable=True),
        sa.Column("category", sa.String(length=255), nullable=True),
        sa.Column("dynamic_portgroup", sa.Boolean(), nullable=False),
        sa.Column("properties", JSON_TYPE, nullable=False),
        sa.Column("internal_info", JSON_TYPE, nullable=False),
        sa.Column("extra", JSON_TYPE, nullable=False),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.Column("updated_at", sa.DateTime(), nullable=True),
        sa.ForeignKeyConstraint(["node_id"], ["nodes.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("address", name="uniq_portgroups0address"),
        sa.UniqueConstraint("name", name="uniq_portgroups0name"),
        sa.UniqueConstraint("uuid", name="uniq_portgroups0uuid"),
    )
    with op.batch_alter_table("portgroups", schema=None) as batch_op:
        batch_op.create_index("portgroups_node_id_idx", ["node_id"], unique=False)

    op.create_table(
        "ports",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("uuid", sa.String(length=36), nullable=False),
        sa.Column("address", sa.String(length=18), nullable=False),
        sa.Column("name", sa.String(length=255), nullable=True),
        sa.Column("description", sa.String(length=255), nullable=True),
        sa.Column("node_id", sa.Integer(), nullable=False),
        sa.Column("portgroup_id", sa.Integer(), nullable=True),
        sa.Column("pxe_enabled", sa.Boolean(), nullable=False),
        sa.Column("is_smartnic", sa.Boolean(), nullable=False),
        sa.Column("physical_network", sa.String(length=64), nullable=True),
        sa.Column("vendor", sa.String(length=255), nullable=True),
        sa.Column("category", sa.String(length=255), nullable=True),
        sa.Column("available_for_dynamic_portgroup", sa.Boolean(), nullable=False),
        sa.Column("local_link_connection", JSON_TYPE, nullable=False),
        sa.Column("internal_info", JSON_TYPE, nullable=False),
        sa.Column("extra", JSON_TYPE, nullable=False),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.Column("updated_at", sa.DateTime(), nullable=True),
        sa.ForeignKeyConstraint(["node_id"], ["nodes.id"], ondelete="CASCADE"),
        sa.ForeignKeyConstraint(
            ["portgroup_id"],
            ["portgroups.id"],
        ),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("address", name="uniq_ports0address"),
        sa.UniqueConstraint("name", name="uniq_ports0name"),
        sa.UniqueConstraint("uuid", name="uniq_ports0uuid"),
    )
    with op.batch_alter_table("ports", schema=None) as batch_op:
        batch_op.create_index("ports_node_id_idx", ["node_id"], unique=False)
        batch_op.create_index("ports_portgroup_id_idx", ["portgroup_id"], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("ports", schema=None) as batch_op:
        batch_op.drop_index("ports_portgroup_id_idx")
        batch_op.drop_index("ports_node_id_idx")

    op.drop_table("ports")
    with op.batch_alter_table("portgroups", schema=None) as batch_op:
        batch_op.drop_index("portgroups_node_id_idx")

    op.drop_table("portgroups")
    with op.batch_alter_table("nodes", schema=None) as batch_op:
        batch_op.drop_index("nodes_resource_class_idx")
        batch_op.drop_index("nodes_provision_state_idx")
        batch_op.drop_index("nodes_pending_action_idx")
        batch_op.drop_index("nodes_driver_idx")
        batch_op.drop_index("nodes_chassis_id_idx")

    op.drop_table("nodes")
    op.drop_table("resource_classes")
    with op.batch_alter_table("node_events", schema=None) as batch_op:
        batch_op.drop_index("node_events_resource_uuid_idx")

    op.drop_table("node_events")
    op.drop_table("chassis")
