"""The database layer: models, engine setup, alembic migrations and the data API (``db.api``)."""
