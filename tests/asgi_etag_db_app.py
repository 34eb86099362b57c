"""A FastAPI app writing with apimw.etag_db on PostgreSQL, as docs/asgi.md shows it, for the
uvicorn tests in tests/test_asgi_etag_db.py.

``APIMW_TEST_DB`` is the database URL, ``APIMW_TEST_TABLE`` the table's name. Every write
bumps the row's ``version``, which is hashed into its etag with the other fields.
"""

from __future__ import annotations

import os
from typing import Annotated, Any

from fastapi import Depends, FastAPI, Request
from fastapi.concurrency import run_in_threadpool
from sqlalchemy import Column, Integer, MetaData, String, Table, create_engine

from apimw.asgi import (
    ETagMiddleware,
    IdempotencyMiddleware,
    MicroversionMiddleware,
    if_match,
    set_response_etag,
)
from apimw.etag import ETagGenerator, IfMatch
from apimw.etag_db import delete_if_match, update_if_match

etags = ETagGenerator(key="asgi-etag-db-test-secret-0123456789")
engine = create_engine(os.environ.get("APIMW_TEST_DB", "postgresql+psycopg://"), pool_size=20, max_overflow=0)


def nodes_table(name: str) -> Table:
    return Table(name, MetaData(), Column("uuid", String(36), primary_key=True),
                 Column("driver", String(64)), Column("version", Integer, nullable=False),
                 Column("etag", String(132), nullable=False))  # fmt: skip


NODES = nodes_table(os.environ.get("APIMW_TEST_TABLE", "nodes"))


def etag_of(row: Any) -> str:
    return etags.etag(dict(row), "node")


def condition(request: Request) -> IfMatch | None:
    return if_match(request.scope)


app = FastAPI()


@app.get("/pid")
async def pid() -> int:
    return os.getpid()


@app.patch("/v1/nodes/{uuid}")
async def patch(uuid: str, request: Request, cond: Annotated[IfMatch | None, Depends(condition)]) -> Any:
    changes = await request.json()  # every await first; the check and the write are one UPDATE
    row = await run_in_threadpool(
        update_if_match, engine, NODES, {"uuid": uuid},
        lambda cur: {**changes, "version": cur["version"] + 1}, if_match=cond, etag_of=etag_of,
    )  # fmt: skip
    set_response_etag(request.scope, row["etag"])
    return {**row, "pid": os.getpid()}


@app.delete("/v1/nodes/{uuid}", status_code=204)
async def remove(uuid: str, cond: Annotated[IfMatch | None, Depends(condition)]) -> None:
    await run_in_threadpool(delete_if_match, engine, NODES, {"uuid": uuid}, if_match=cond)


app.add_middleware(ETagMiddleware, min_version="1.2", enforces="*")
app.add_middleware(IdempotencyMiddleware, store="memory://", scope="shared")
app.add_middleware(MicroversionMiddleware, service_type="baremetal", min_version="1.1", max_version="1.9")
