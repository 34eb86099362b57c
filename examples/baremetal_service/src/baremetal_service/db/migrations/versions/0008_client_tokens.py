"""Recorded client tokens: the durable X-Client-Token guard of every create.

Shaped as ``db/models_client_tokens.py`` declares it (a test compares the two).

Revision ID: 0008
Revises: 0007
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "client_tokens",
        sa.Column("scope", sa.String(length=255), nullable=False),
        sa.Column("token", sa.String(length=255), nullable=False),
        sa.Column("fingerprint", sa.String(length=64), nullable=False),
        sa.Column("resource_kind", sa.String(length=64), nullable=False),
        sa.Column("resource_id", sa.String(length=255), nullable=False),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.PrimaryKeyConstraint("scope", "token", name="client_tokens_pkey"),
    )
    with op.batch_alter_table("client_tokens") as batch:
        batch.create_index("client_tokens_created_at_idx", ["created_at"], unique=False)


def downgrade() -> None:
    op.drop_table("client_tokens")
