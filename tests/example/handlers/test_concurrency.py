"""Concurrent writes over HTTP: one If-Match wins; JSON Patches never lose each other's changes."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

from .conftest import Api

WRITERS = 8


def test_one_if_match_one_winner(api: Api) -> None:
    node = api.node(name="race")
    etag = api.get(f"/v1/nodes/{node['uuid']}").headers["ETag"]

    def write(i: int) -> int:
        client = Api(api.url)
        patch = [{"op": "add", "path": f"/extra/w{i}", "value": i}]
        return client.patch(f"/v1/nodes/{node['uuid']}", patch, headers={"If-Match": etag}).status_code

    with ThreadPoolExecutor(WRITERS) as pool:
        statuses = sorted(pool.map(write, range(WRITERS)))
    assert statuses == [200] + [412] * (WRITERS - 1)
    assert len(api.get(f"/v1/nodes/{node['uuid']}").json()["extra"]) == 1


def test_concurrent_patches_without_if_match_all_apply(api: Api) -> None:
    # Each JSON Patch is applied to the current node inside the service's compare-and-swap,
    # so concurrent additions of different keys all land (no lost update).
    node = api.node(name="merge")

    def write(i: int) -> int:
        client = Api(api.url)
        patch = [{"op": "add", "path": f"/extra/k{i}", "value": i}]
        return client.patch(f"/v1/nodes/{node['uuid']}", patch).status_code

    with ThreadPoolExecutor(WRITERS) as pool:
        statuses = list(pool.map(write, range(WRITERS)))
    assert statuses == [200] * WRITERS
    extra = api.get(f"/v1/nodes/{node['uuid']}").json()["extra"]
    assert extra == {f"k{i}": i for i in range(WRITERS)}
