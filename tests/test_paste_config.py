"""paste.deploy ``filter_factory``: the global conf, then the filter's own settings over it.

paste.deploy leaves out of a section's settings every key that ``[DEFAULT]`` also names,
so ``store = %(store)s`` reaches the factory only through the global conf.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from paste.deploy import loadapp

from apimw import etag, idempotency, microversion
from apimw.errors import ConfigError


def app_factory(global_conf: Any, **local_conf: str) -> Any:
    def app(environ: Any, start_response: Any) -> list[bytes]:
        start_response("200 OK", [("Content-Type", "text/plain")])
        return [b"ok"]

    return app


def load(tmp_path: Path, default: str, section: str, **global_conf: str) -> Any:
    ini = tmp_path / "api-paste.ini"
    ini.write_text(
        f"[DEFAULT]\n{default}\n\n[pipeline:main]\npipeline = idempotency app\n\n"
        f"[filter:idempotency]\nuse = egg:apimw#idempotency\n{section}\n\n"
        "[app:app]\npaste.app_factory = tests.test_paste_config:app_factory\n"
    )
    return loadapp(f"config:{ini}", global_conf=global_conf or None)


def built_store(app: Any) -> str:
    assert isinstance(app, idempotency.IdempotencyMiddleware)
    name = app.store.name
    app.close()
    return str(name)


@pytest.mark.parametrize(
    ("default", "section", "expected"),
    [
        pytest.param("store = memory://defaults", "store = %(store)s", "memory://defaults",
                     id="interpolated"),
        pytest.param("store = memory://defaults", "", "memory://defaults", id="default-only"),
        pytest.param("store = memory://defaults", "store = memory://defaults", "memory://defaults",
                     id="same-value-written-out"),
        pytest.param("store = memory://defaults", "set store = memory://own", "memory://own",
                     id="set-overrides"),
        pytest.param("database = sqlite://", "store = memory://own", "memory://own", id="own-only"),
    ],
)  # fmt: skip
def test_the_store_built_is_the_one_the_file_names(
    tmp_path: Path, default: str, section: str, expected: str
) -> None:
    assert built_store(load(tmp_path, default, section)) == expected


def test_the_loaders_global_conf_counts_too(tmp_path: Path) -> None:
    app = load(tmp_path, "store = memory://defaults", "store = %(store)s", store="memory://loader")
    assert built_store(app) == "memory://loader"


def test_a_line_paste_would_drop_is_refused_without_showing_it(tmp_path: Path) -> None:
    """``store = redis://:pw@...`` under ``[DEFAULT] store = memory://`` would silently be memory://."""
    with pytest.raises(ConfigError) as info:
        load(tmp_path, "store = memory://", "store = redis://:hunter2@127.0.0.1:1/0")
    message = str(info.value)
    assert "[filter:idempotency]" in message and "'store' line is not used" in message
    assert "set store = ..." in message and "hunter2" not in message


def test_unknown_global_keys_are_not_options(tmp_path: Path) -> None:
    """``here``, ``__file__``, ``database``, another filter's settings: never an unknown-option error."""
    app = load(tmp_path, "database = sqlite://\nrun_conductor = true\nservice_type = baremetal", "")
    assert built_store(app) == "memory://"


def test_a_bad_global_value_names_the_filter(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"\[filter:idempotency\] in .* \(from \[DEFAULT\] .*'lease'"):
        load(tmp_path, "lease = soon", "")


@pytest.mark.parametrize(
    ("module", "global_conf", "local_conf", "check"),
    [
        pytest.param(microversion, {"service_type": "baremetal", "min_version": "1.1", "max_version": "1.5"},
                     {"max_version": "1.9"}, lambda mw: str(mw.max_version) == "1.9", id="microversion"),
        pytest.param(etag, {"min_version": "1.40", "here": "/srv"}, {"min_version": "1.46"},
                     lambda mw: str(mw.min_version) == "1.46", id="etag"),
        pytest.param(idempotency, {"store": "memory://global", "__file__": "/nowhere.ini"},
                     {"store": "memory://local"}, lambda mw: mw.store.name == "memory://local",
                     id="idempotency"),
    ],
)  # fmt: skip
def test_called_directly_the_local_conf_wins(
    module: Any, global_conf: Any, local_conf: Any, check: Any
) -> None:
    mw = module.filter_factory(global_conf, **local_conf)(app_factory({}))
    try:
        assert check(mw)
    finally:
        getattr(mw, "close", lambda: None)()
