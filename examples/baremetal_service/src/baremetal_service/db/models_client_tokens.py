"""Schema of the recorded client tokens (migration 0008): apimw's database-side guard.

Every create run with an ``X-Client-Token`` records ``(scope, token)`` here in the
transaction that inserts the resource (:func:`apimw.idempotency_db.record_token`), so a
retry whose replay-store record is gone (a restarted memcached, an expired lease) is
answered with the resource the first execution created instead of creating another.
The columns are :func:`apimw.idempotency_db.client_tokens_table`'s (a test compares
them); rows older than the retention are removed by ``purge_tokens``.
"""

from __future__ import annotations

import datetime as dt

from sqlalchemy import DateTime, Index, PrimaryKeyConstraint, String
from sqlalchemy.orm import Mapped, mapped_column

from .models import Base

__all__ = ["ClientTokenRecord"]


class ClientTokenRecord(Base):
    __tablename__ = "client_tokens"
    __table_args__ = (
        PrimaryKeyConstraint("scope", "token", name="client_tokens_pkey"),
        Index("client_tokens_created_at_idx", "created_at"),
    )

    scope: Mapped[str] = mapped_column(String(255), nullable=False)
    token: Mapped[str] = mapped_column(String(255), nullable=False)
    fingerprint: Mapped[str] = mapped_column(String(64), nullable=False)
    resource_kind: Mapped[str] = mapped_column(String(64), nullable=False)
    resource_id: Mapped[str] = mapped_column(String(255), nullable=False)
    created_at: Mapped[dt.datetime] = mapped_column(DateTime(), nullable=False)
