"""List answers are bounded in bytes, and so is the memory that makes them.

Before: ``GET /v1/nodes/detail?limit=1000`` over nodes carrying large JSON fields was one
~100 MB answer, and four at once grew the server by ~480 MB for good.  Now a page stops
before the item that would take it past the page byte budget (4 MiB by default) and links
to the rest with ``next``, as Ironic's clients follow it; the rows behind it are read a
chunk at a time.  Followed through ``next``, the pages give every node once, in order, with
the same bytes as without the budget.
"""

from __future__ import annotations

import json
import sys
import threading
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import flask
import openstack
import pytest
import requests
from werkzeug.test import Client

from baremetal_service.deploy import make_service, wrap
from baremetal_service.exceptions import NodeNotFound
from baremetal_service.handlers import common
from baremetal_service.handlers.routes import create_flask_app
from bench._http import rss_kib
from bench.bench_vs_ironic import clone_nodes
from tests.servers import cli_service

LATEST = {"X-OpenStack-Ironic-API-Version": "latest"}


def _big_fields(i: int, size: int) -> dict[str, Any]:
    """JSON fields of about *size* bytes in all (each under the 64 KiB field limit)."""
    part = max(1, size // 3)
    return {
        "extra": {"blob": "e" * part, "i": i},
        "properties": {"blob": "p" * part, "cpus": i},
        "instance_info": {"blob": "x" * part, "root_gb": 10},
    }


def _walk(client: Client, path: str) -> tuple[list[dict[str, Any]], list[int]]:
    """Every item of *path* following ``next`` (bounded): the items and each page's size."""
    items: list[dict[str, Any]] = []
    sizes: list[int] = []
    url: str | None = path
    for _ in range(500):
        if url is None:
            return items, sizes
        resp = client.get(url, headers=LATEST)
        assert resp.status_code == 200, resp.get_data()[:500]
        doc = resp.json
        key = next(k for k in doc if k != "next")
        items += doc[key]
        sizes.append(len(resp.get_data()))
        nxt = doc.get("next")
        url = None if nxt is None else urlsplit(nxt)._replace(scheme="", netloc="").geturl()
    raise AssertionError("more than 500 pages")


@pytest.mark.parametrize(
    "path",
    [
        "/v1/nodes/detail?limit=1000",
        "/v1/nodes/detail",
        "/v1/nodes?fields=uuid,extra&limit=1000&sort_key=name&sort_dir=desc",
        "/v1/nodes?limit=7",
        "/v1/nodes?detail=true&sort_key=created_at",
        "/v1/ports/detail?limit=1000",
        "/v1/ports?detail=true&limit=13",
    ],
)
def test_pages_stop_at_the_byte_budget_and_next_gives_every_item_once(database_url: str, path: str) -> None:
    service = make_service(database_url, conductor_workers=0)
    flask_app = create_flask_app(service)
    budget = 200_000
    try:
        client = Client(wrap(flask_app.wsgi_app, store_url="memory://"))
        uuids = []
        for i in range(40):
            body = {
                "driver": "fake-hardware",
                "name": f"n-{i:03d}",
                **_big_fields(i, 30_000 if i % 3 else 300),
            }
            resp = client.post("/v1/nodes", json=body, headers=LATEST)
            assert resp.status_code == 201, resp.get_data()[:500]
            uuids.append(resp.json["uuid"])
            port = {
                "node_uuid": uuids[-1],
                "address": f"52:54:00:00:00:{i:02x}",
                "extra": {"b": "y" * 20_000},
            }
            assert client.post("/v1/ports", json=port, headers=LATEST).status_code == 201
        flask_app.config[common.PAGE_BYTES_KEY] = budget
        items, sizes = _walk(client, path)
        flask_app.config.pop(common.PAGE_BYTES_KEY)
        unbounded, _ = _walk(client, path)
        # nothing lost or repeated, in the same order as without the budget
        assert [d["uuid"] for d in items] == [d["uuid"] for d in unbounded]
        assert len({d["uuid"] for d in items}) == len(items) == 40
        assert items == unbounded
        if "limit=7" not in path:  # (a page of 7 small items never reaches the budget)
            assert len(sizes) >= 2, sizes  # the budget cut the pages
        # a page passes the budget by at most its envelope (next link...)
        assert max(sizes) <= budget + 1000, sizes
    finally:
        service.close()


def _tree_rss_kib(pid: int) -> int:
    """The resident set of *pid* and its children (granian's worker serves), in KiB."""
    total = 0
    for each in [pid, *_children(pid)]:
        total += rss_kib(each) or 0
    assert total > 0
    return total


def _children(pid: int) -> list[int]:
    try:
        return [int(c) for c in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except OSError:
        return []


def test_the_default_budget_keeps_a_full_detail_page_of_ordinary_nodes(database_url: str) -> None:
    """The budget only cuts pages of large nodes: a detail page of 1,000 ordinary nodes is
    one page of 1,000 (and a full page links to the rest, as Ironic's does)."""
    service = make_service(database_url, conductor_workers=0)
    try:
        client = Client(wrap(create_flask_app(service).wsgi_app, store_url="memory://"))
        body = {
            "driver": "fake-hardware",
            "driver_info": {"ipmi_address": "10.0.0.1", "ipmi_password": "p"},
            "properties": {"cpus": 8, "memory_mb": 8192},
            "instance_info": {"image_source": "http://i/x"},
        }
        first = client.post("/v1/nodes", json=body, headers=LATEST)
        assert first.status_code == 201
        clone_nodes(database_url, first.json["uuid"], 999, "ordinary")
        page = client.get("/v1/nodes/detail?limit=1000", headers=LATEST)
        assert page.status_code == 200
        assert len(page.json["nodes"]) == 1000 and "next" in page.json
        assert len(page.get_data()) < common.MAX_PAGE_BYTES
    finally:
        service.close()


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/PID/status")
@pytest.mark.filterwarnings(  # openstacksdk's warnings about its own internals
    "ignore::openstack.warnings._RemovedInSDKWarning",
    "ignore::openstack.warnings.OpenStackDeprecationWarning",
)
def test_four_parallel_largest_pages_grow_the_server_by_at_most_150_mb(tmp_path: Path) -> None:
    """1,000 nodes of ~100 KB each (a 102 MB detail page); four clients walk
    ``/v1/nodes/detail?limit=1000`` at once, following ``next``: the serving process grows by
    at most 150 MB and each client sees every node once."""
    with cli_service(tmp_path, "--no-conductor") as service:
        url = service.url
        session = requests.Session()
        session.headers.update(LATEST)
        created = session.post(url + "/v1/nodes", json={"driver": "fake-hardware", **_big_fields(0, 100_000)},
                               timeout=30)  # fmt: skip
        assert created.status_code == 201, created.text[:500]
        clone_nodes(f"sqlite:///{tmp_path / 'service.db'}", created.json()["uuid"], 999, "big")
        assert session.get(url + "/v1/nodes/detail?limit=5", timeout=30).status_code == 200  # (warm)
        before = _tree_rss_kib(service.proc.pid)
        results: list[Any] = [None] * 4

        def walk(index: int) -> None:
            seen: list[str] = []
            sizes: list[int] = []
            link: str | None = url + "/v1/nodes/detail?limit=1000"
            with requests.Session() as own:
                own.headers.update(LATEST)
                for _ in range(200):
                    if link is None:
                        break
                    resp = own.get(link, timeout=120)
                    if resp.status_code != 200:
                        results[index] = AssertionError(f"{resp.status_code}: {resp.text[:300]}")
                        return
                    sizes.append(len(resp.content))
                    doc = resp.json()
                    seen += [n["uuid"] for n in doc["nodes"]]
                    link = doc.get("next")
            results[index] = (seen, sizes)

        threads = [threading.Thread(target=walk, args=(i,)) for i in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=600)
        after = _tree_rss_kib(service.proc.pid)
        growth_mb = (after - before) / 1024
        print(json.dumps({"rss_before_mb": before / 1024, "rss_after_mb": after / 1024}))
        assert growth_mb <= 150, (
            f"the server grew by {growth_mb:.0f} MB ({before // 1024} -> {after // 1024} MB)"
        )
        for result in results:
            assert not isinstance(result, BaseException) and result is not None, result
            seen, sizes = result
            assert len(seen) == len(set(seen)) == 1000
            assert max(sizes) <= common.MAX_PAGE_BYTES + 2000
        # openstacksdk follows next through the shorter pages (its own page size, then ours)
        conn = openstack.connect(auth_type="none", baremetal_endpoint_override=url)
        try:
            listed = [n.id for n in conn.baremetal.nodes(details=True)]
            assert len(listed) == len(set(listed)) == 1000
            assert [n.id for n in conn.baremetal.nodes(details=True, limit=1000)] == listed
        finally:
            conn.close()


def test_a_page_holds_one_item_larger_than_the_budget_and_ends_where_a_marker_vanished() -> None:
    """:func:`common.collect_page` on its own: an item larger than the whole budget is still
    served (alone on its page, with ``next``); when the last item of a read is deleted before
    the next read of the same page (its marker is gone: 404), the page ends there with
    ``next`` instead of failing; a 404 for the client's own marker is the client's 404."""
    app = flask.Flask("pages")
    app.config[common.PAGE_BYTES_KEY] = 100
    items = [{"uuid": f"u{i}", "blob": "b" * (500 if i == 0 else 10)} for i in range(60)]

    def fetch(count: int, marker: str | None) -> tuple[list[dict[str, Any]], list[str]]:
        if marker == "u24":  # deleted since it was read
            raise NodeNotFound("u24")
        start = 0 if marker is None else int(marker[1:]) + 1
        chosen = items[start : start + count]
        return chosen, [i["uuid"] for i in chosen]

    with app.app_context():
        page = common.collect_page(fetch, 1000, None)
        assert [json.loads(b)["uuid"] for b in page.items] == ["u0"] and page.more and page.last == "u0"
        app.config[common.PAGE_BYTES_KEY] = 10_000
        page = common.collect_page(fetch, 1000, None)  # a first read of 25 items, then after u24: gone
        assert [json.loads(b)["uuid"] for b in page.items] == [f"u{i}" for i in range(25)]
        assert page.more and page.last == "u24"
        page = common.collect_page(fetch, 1000, "u30")  # the rest, in two reads
        assert len(page.items) == 29 and not page.more and page.last == "u59"
        with pytest.raises(NodeNotFound):
            common.collect_page(fetch, 1000, "u24")
