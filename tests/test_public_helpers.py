"""The public helpers applications use besides the middlewares: replay stores and config values."""

from __future__ import annotations

import pytest

from apimw.config import as_bool, as_float, as_int, as_list
from apimw.errors import ConfigError
from apimw.idempotency import check_replay_store, open_replay_store

from .servers import HOST, Server, free_port


def test_open_replay_store_memory_is_always_reachable() -> None:
    store = open_replay_store("memory://")
    try:
        check_replay_store(store)
        assert store.claim("k", b"v", 5.0) is None
        assert store.get("k") == b"v"
    finally:
        store.close()


def test_open_replay_store_redis_reachable_then_down(redis_server: Server) -> None:
    store = open_replay_store(redis_server.url, timeout=0.5)
    try:
        check_replay_store(store)
    finally:
        store.close()
    down = open_replay_store(f"redis://{HOST}:{free_port()}/0", timeout=0.2)
    try:
        with pytest.raises(Exception):  # noqa: B017, PT011 - the client's connection error, whatever its class
            check_replay_store(down)
    finally:
        down.close()


@pytest.mark.parametrize("url", ["nope", "ftp://x", ""])
def test_open_replay_store_refuses_unknown_urls(url: str) -> None:
    with pytest.raises(ConfigError):
        open_replay_store(url)


def test_config_values_parse_like_the_middlewares_options() -> None:
    assert [as_bool(v) for v in ("true", "Yes", " on ", "1", True)] == [True] * 5
    assert [as_bool(v) for v in ("false", "NO", "off", "0", False)] == [False] * 5
    assert as_float("2") == 2.0 and as_float(" 0.5 ") == 0.5 and as_int("-3") == -3
    assert as_list("a, b\nc,,") == ["a", "b", "c"]
    for bad, parse in (("maybe", as_bool), ("x", as_float), ("1.5", as_int), ("²", as_int)):
        with pytest.raises(ConfigError):
            parse(bad)  # type: ignore[operator]
