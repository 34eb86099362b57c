"""Recorded client tokens: the durable X-Client-Token guard of every create.

Shaped as ``db/models.py`` declares it (a test compares the two).

Revision ID: 0008
Revises: 0007
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from baremetal_service.db.migrations.columns import created_at, string

revision = "0008"
down_revision = "0007"


def upgrade() -> None:
    op.create_table(
        "client_tokens",
        string("scope", nullable=False),
        string("token", nullable=False),
        string("fingerprint", 64, nullable=False),
        string("resource_kind", 64, nullable=False),
        string("resource_id", nullable=False),
        created_at(),
        sa.PrimaryKeyConstraint("scope", "token", name="client_tokens_pkey"),
    )
    op.create_index("client_tokens_created_at_idx", "client_tokens", ["created_at"], unique=False)


def downgrade() -> None:
    op.drop_table("client_tokens")
