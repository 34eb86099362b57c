"""Node features: traits, VIFs, virtual media, firmware components, retirement, instance names (helper-owned slot).

Revision ID: 0003
Revises: 0002
"""

from __future__ import annotations

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    pass


def downgrade() -> None:
    pass
