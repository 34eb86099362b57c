"""Alembic environment: runs on the connection handed over by ``db.migrate.upgrade``."""

from __future__ import annotations

from alembic import context
from sqlalchemy.engine import Connection

from baremetal_service.db.engine import create_engine
from baremetal_service.db.models import Base

config = context.config
connection = config.attributes.get("connection")


def _run(conn: Connection) -> None:
    context.configure(
        connection=conn,
        target_metadata=Base.metadata,
        render_as_batch=conn.dialect.name == "sqlite",
    )
    with context.begin_transaction():
        context.run_migrations()


if connection is not None:
    _run(connection)
else:  # `alembic -c .../alembic.ini upgrade head` from a shell
    engine = create_engine(config.get_main_option("sqlalchemy.url") or "")
    with engine.begin() as conn:
        _run(conn)
    engine.dispose()
