"""Conductor rows and resource classes: small tables with no etag and no events.

:class:`ConductorQueries` keeps one row per conductor host (an upsert per heartbeat);
:class:`ResourceClassQueries` the resource class names.  Both are parts of
:class:`.api.Database` (its mixins), reading through its ``reader`` engine and writing
through its ``engine``.
"""

from __future__ import annotations

import builtins
from collections.abc import Callable, Sequence
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import Engine

from baremetal_service import exceptions as exc
from baremetal_service.db.kinds import CONDUCTORS, MAX_LIMIT, NODES, RESOURCE_CLASSES, iso, utcnow

__all__ = ["ConductorQueries", "ResourceClassQueries", "upsert"]


def upsert(engine: Engine, table: sa.Table) -> Any:
    """``INSERT ... ON CONFLICT`` of *engine*'s dialect (PostgreSQL's, else SQLite's)."""
    dialect = postgresql if engine.dialect.name == "postgresql" else sqlite
    return dialect.insert(table)


class ResourceClassQueries:
    """Resource classes (no etag, no references)."""

    engine: Engine
    reader: Engine

    def ensure_resource_class(self, name: str, *, must_create: bool) -> bool:
        """Create *name*; ``True`` if created, ``False`` if it existed (409 if *must_create*)."""
        stmt = (
            upsert(self.engine, RESOURCE_CLASSES)
            .values(name=name, created_at=utcnow())
            .on_conflict_do_nothing(index_elements=["name"])
            .returning(RESOURCE_CLASSES.c.id)  # rowcount is -1 here with psycopg 3
        )
        with self.engine.begin() as conn:
            created = conn.execute(stmt).first() is not None
        if not created and must_create:
            raise exc.ResourceClassExists(name)
        return created

    def get_resource_class(self, name: str) -> dict[str, Any]:
        if "\x00" in name:
            raise exc.ResourceClassNotFound(name)
        with self.reader.connect() as conn:
            row = (
                conn.execute(sa.select(RESOURCE_CLASSES).where(RESOURCE_CLASSES.c.name == name))
                .mappings()
                .first()
            )
        if row is None:
            raise exc.ResourceClassNotFound(name)
        return {
            "name": row["name"],
            "created_at": iso(row["created_at"]),
            "updated_at": iso(row["updated_at"]),
        }

    def list_resource_classes(self) -> builtins.list[dict[str, Any]]:
        with self.reader.connect() as conn:
            rows = (
                conn.execute(sa.select(RESOURCE_CLASSES).order_by(RESOURCE_CLASSES.c.name)).mappings().all()
            )
        return [
            {"name": r["name"], "created_at": iso(r["created_at"]), "updated_at": iso(r["updated_at"])}
            for r in rows
        ]

    def delete_resource_class(self, name: str) -> None:
        if "\x00" in name:
            raise exc.ResourceClassNotFound(name)
        with self.engine.begin() as conn:
            in_use = conn.execute(
                sa.select(NODES.c.id).where(NODES.c.resource_class == name).limit(1)
            ).first()
            if in_use is not None:
                raise exc.ResourceClassInUse(name)
            if conn.execute(RESOURCE_CLASSES.delete().where(RESOURCE_CLASSES.c.name == name)).rowcount != 1:
                raise exc.ResourceClassNotFound(name)


class ConductorQueries:
    """Conductors (a heartbeat table: no etag, no events)."""

    engine: Engine
    reader: Engine

    def conductor_heartbeat(
        self, hostname: str, *, conductor_group: str, drivers: Sequence[str], online: bool
    ) -> None:
        """Upsert *hostname*'s row (one statement; concurrent processes of a host agree)."""
        now = utcnow()
        values = {
            "hostname": hostname, "conductor_group": conductor_group, "drivers": builtins.list(drivers),
            "online": online, "created_at": now, "updated_at": now,
        }  # fmt: skip
        stmt = upsert(self.engine, CONDUCTORS).values(**values)
        stmt = stmt.on_conflict_do_update(
            index_elements=["hostname"],
            set_={k: values[k] for k in ("conductor_group", "drivers", "online", "updated_at")},
        )
        with self.engine.begin() as conn:
            conn.execute(stmt)

    def get_conductor(self, hostname: str) -> dict[str, Any] | None:
        """The conductor row of *hostname* (datetimes as stored), or None."""
        if "\x00" in hostname:
            return None
        with self.reader.connect() as conn:
            stmt = sa.select(CONDUCTORS).where(CONDUCTORS.c.hostname == hostname)
            row = conn.execute(stmt).mappings().first()
        return None if row is None else dict(row)

    def list_conductors(
        self,
        *,
        limit: int | None = None,
        marker: str | None = None,
        sort_key: str = "id",
        sort_dir: str = "asc",
        not_found: Callable[[str], Exception] = LookupError,
    ) -> builtins.list[dict[str, Any]]:
        """A page of conductor rows by (*sort_key*, id) after the *marker* hostname."""
        col = CONDUCTORS.c[sort_key]
        id_col = CONDUCTORS.c.id
        order = [col.asc(), id_col.asc()] if sort_dir == "asc" else [col.desc(), id_col.desc()]
        stmt = sa.select(CONDUCTORS).order_by(*order).limit(min(limit or MAX_LIMIT, MAX_LIMIT))
        with self.reader.connect() as conn:
            if marker is not None:
                mrow = conn.execute(sa.select(col, id_col).where(CONDUCTORS.c.hostname == marker)).first()
                if mrow is None:
                    raise not_found(marker)
                value, row_id = mrow
                if sort_dir == "asc":
                    stmt = stmt.where(sa.or_(col > value, sa.and_(col == value, id_col > row_id)))
                else:
                    stmt = stmt.where(sa.or_(col < value, sa.and_(col == value, id_col < row_id)))
            return [dict(r) for r in conn.execute(stmt).mappings().all()]
