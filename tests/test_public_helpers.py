"""The public helpers applications use besides the middlewares: replay stores, config values,
discovery documents and versioned fields."""

from __future__ import annotations

import json
from typing import Any

import pytest
from webob import Request

import apimw.asgi
import apimw.etag
from apimw import Version, VersionedFields
from apimw.config import as_bool, as_float, as_int, as_list
from apimw.discovery import DiscoveryResponder, major_document, root_document
from apimw.errors import ConfigError, StoreError
from apimw.idempotency import open_store

from .servers import HOST, Server, free_port
from .wsgi import run


def test_open_store_memory_is_always_reachable() -> None:
    store = open_store("memory://")
    try:
        assert store.get("probe") is None
        assert store.claim("k", b"v", 5.0) is None
        assert store.get("k") == b"v"
    finally:
        store.close()


def test_open_store_redis_reachable_then_down(redis_server: Server) -> None:
    # a health check reads any key: it returns while the store answers, raises when it cannot
    store = open_store(redis_server.url, timeout=0.5)
    try:
        assert store.get("probe") is None
    finally:
        store.close()
    down = open_store(f"redis://{HOST}:{free_port()}/0", timeout=0.2)
    try:
        with pytest.raises(StoreError):
            down.get("probe")
    finally:
        down.close()


@pytest.mark.parametrize("url", ["nope", "ftp://x", ""])
def test_open_store_refuses_unknown_urls(url: str) -> None:
    with pytest.raises(ConfigError):
        open_store(url)


def test_config_values_parse_like_the_middlewares_options() -> None:
    assert [as_bool(v) for v in ("true", "Yes", " on ", "1", True)] == [True] * 5
    assert [as_bool(v) for v in ("false", "NO", "off", "0", False)] == [False] * 5
    assert as_float("2") == 2.0 and as_float(" 0.5 ") == 0.5 and as_int("-3") == -3
    assert as_list("a, b\nc,,") == ["a", "b", "c"]
    for bad, parse in (("maybe", as_bool), ("x", as_float), ("1.5", as_int), ("²", as_int)):
        with pytest.raises(ConfigError):
            parse(bad)  # type: ignore[operator]


# -- discovery documents and versioned fields, as an app serving discovery itself uses them ----


def test_major_document_adds_links_after_self_relative_to_the_base() -> None:
    links = [
        {"href": "https://docs.example.org/api.html", "rel": "describedby", "type": "text/html"},
        {"href": "/v1/openapi.json", "rel": "service-desc", "type": "application/openapi+json"},
    ]
    doc = major_document(
        base_url="http://h:6385/bm", min_version=Version(1, 1), max_version=Version(1, 9), links=links
    )
    assert doc["links"] == [
        {"href": "http://h:6385/bm/v1/", "rel": "self"},
        links[0],
        {**links[1], "href": "http://h:6385/bm/v1/openapi.json"},
    ]


def test_ironic_entries_leave_max_version_out() -> None:
    lo, hi = Version(1, 1), Version(1, 115)
    ironic = root_document(base_url="", min_version=lo, max_version=hi, max_version_field=False)
    assert ironic["default_version"] == {
        "id": "v1", "links": [{"href": "/v1/", "rel": "self"}], "status": "CURRENT",
        "min_version": "1.1", "version": "1.115",
    }  # fmt: skip
    major = major_document(base_url="", min_version=lo, max_version=hi, max_version_field=False)
    assert "max_version" not in major["version"]
    assert root_document(base_url="", min_version=lo, max_version=hi)["versions"][0]["max_version"] == "1.115"


def test_discovery_responder_serves_the_links() -> None:
    responder = DiscoveryResponder(
        min_version=Version(1, 1), max_version=Version(1, 9), max_version_field=False,
        links=[{"href": "/v1/openapi.json", "rel": "service-desc"}],
    )  # fmt: skip
    doc = json.loads(responder.body("major", "http://h"))
    assert doc["links"][1] == {"href": "http://h/v1/openapi.json", "rel": "service-desc"}
    assert "max_version" not in doc["version"]


@pytest.mark.parametrize(
    "link", [{"rel": "describedby"}, {"href": "/x", "rel": ""}, {"href": "/x", "rel": "a", "type": 1}]
)
def test_bad_discovery_links_fail_at_construction(link: Any) -> None:
    with pytest.raises(ConfigError, match="discovery links"):
        DiscoveryResponder(min_version=Version(1, 1), max_version=Version(1, 9), links=[link])


def test_versioned_fields_answer_since_and_visible_in_order() -> None:
    fields = VersionedFields({"name": "1.5", "description": "1.51"})
    assert fields.since("name") == Version(1, 5) and fields.since("uuid") is None
    order = ("uuid", "description", "name")
    assert fields.visible(order, Version(1, 4)) == ("uuid",)
    assert fields.visible(order, Version(1, 51)) == order


def test_the_if_match_helpers_read_the_wsgi_environ_as_they_read_the_asgi_scope() -> None:
    seen: dict[str, Any] = {}

    def app(environ: dict[str, Any], start_response: Any) -> list[bytes]:
        seen["if_match"] = apimw.etag.if_match(environ)
        seen["if_none_match"] = apimw.etag.if_none_match(environ)
        apimw.etag.mark_enforced(environ)
        start_response("204 No Content", [])
        return []

    wrapped = apimw.etag.ETagMiddleware(app, enforces="PUT")
    put = Request.blank("/v1/nodes/n1", method="PUT", headers={"If-Match": 'W/"a", W/"b"',
                                                                  "If-None-Match": "*"})  # fmt: skip
    assert run(wrapped, put).status_int == 204
    assert seen["if_match"] is not None and seen["if_match"].matches('W/"b"')
    assert not seen["if_match"].matches('W/"c"')
    assert seen["if_none_match"] is not None and seen["if_none_match"].any
    assert run(wrapped, Request.blank("/v1/nodes/n1", method="PUT")).status_int == 204
    assert seen["if_match"] is None and seen["if_none_match"] is None
    # one helper for both doors: the scope is read as the environ is
    assert apimw.asgi.if_match is apimw.etag.if_match
