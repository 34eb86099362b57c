"""``oslo_hook(app) -> app``: each middleware configured from the host's global ``cfg.CONF``.

A host service (OpenStack Ironic's ``[api] middleware``) parses its own command line
(``--config-file`` several times, ``--config-dir``) into ``oslo_config.cfg.CONF`` and then
calls ``plugin(app)``.  The hook registers its group there and reads every file the host
read.  The tests put a fresh, real ``ConfigOpts`` in ``cfg.CONF`` for the host's.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from oslo_config import cfg
from webob import Request

from apimw import etag, idempotency, microversion
from apimw.errors import ConfigError
from apimw.microversion import served_version

KEY = "k" * 32
PROJECT = {"X-Project-Id": "p1"}  # set by the auth middleware in front


def echo_version(environ: dict[str, Any], start_response: Any) -> list[bytes]:
    body = json.dumps({"version": str(served_version(environ)), "n": len(CALLS)}).encode()
    CALLS.append(environ["REQUEST_METHOD"])
    start_response("201 Created", [("Content-Type", "application/json")])
    return [body]


CALLS: list[str] = []


@pytest.fixture
def host_conf(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    """The host's global CONF, parsed from two files and a config dir like ``ironic-api`` is."""

    def parse(first: str, second: str, in_dir: str) -> cfg.ConfigOpts:
        one, two, conf_d = tmp_path / "host.conf", tmp_path / "local.conf", tmp_path / "host.conf.d"
        conf_d.mkdir()
        one.write_text(first)
        two.write_text(second)
        (conf_d / "50-apimw.conf").write_text(in_dir)
        conf = cfg.ConfigOpts()
        monkeypatch.setattr(cfg, "CONF", conf)
        args = ["--config-file", str(one), "--config-file", str(two), "--config-dir", str(conf_d)]
        conf(args, project="host", default_config_files=[], default_config_dirs=[])
        return conf

    CALLS.clear()
    return parse


def test_microversion_hook_reads_every_file_the_host_read(host_conf: Any) -> None:
    host_conf(
        "[apimw_microversion]\nservice_type = baremetal\nmin_version = 1.1\nmax_version = 1.50\n",
        "[apimw_microversion]\nmax_version = 1.60\n",  # the later file wins
        "[apimw_microversion]\nlegacy_header = X-OpenStack-Ironic-API-Version\n",
    )
    app = microversion.oslo_hook(echo_version)
    latest = Request.blank("/v1/nodes", headers={"OpenStack-API-Version": "baremetal latest"})
    resp = latest.get_response(app)
    assert resp.json["version"] == "1.60"
    assert resp.headers["X-OpenStack-Ironic-API-Maximum-Version"] == "1.60"
    legacy = Request.blank("/v1/nodes", headers={"X-OpenStack-Ironic-API-Version": "1.55"})
    assert legacy.get_response(app).json["version"] == "1.55"


def test_idempotency_and_etag_hooks_read_their_groups(host_conf: Any) -> None:
    host_conf(
        "[apimw_idempotency]\nstore = memory://\n",
        "[apimw_idempotency]\nmethods = POST,PATCH\n",
        f"[apimw_etag]\nhmac_key = {KEY}\nrequire_if_match = PATCH\nenforces = PATCH\n",
    )
    app = idempotency.oslo_hook(etag.oslo_hook(echo_version))

    def patch(token: str) -> Any:
        req = Request.blank("/v1/nodes/n1", method="PATCH", headers={"X-Client-Token": token, **PROJECT})
        return req.get_response(app)

    assert patch("t1").status_int == 428  # etag's require_if_match, from the config dir
    post = Request.blank("/v1/nodes", method="POST", headers={"X-Client-Token": "t2", **PROJECT}, body=b"{}")
    first = post.get_response(app)
    again = Request.blank("/v1/nodes", method="POST", headers={"X-Client-Token": "t2", **PROJECT}, body=b"{}")
    replay = again.get_response(app)
    assert first.status_int == replay.status_int == 201
    assert replay.headers["Idempotent-Replayed"] == "true" and CALLS == ["POST"]


def test_missing_required_option_names_the_group(host_conf: Any) -> None:
    host_conf("[apimw_microversion]\nservice_type = baremetal\n", "", "[DEFAULT]\n")
    with pytest.raises(ConfigError, match=r"\[apimw_microversion\].*min_version, max_version"):
        microversion.oslo_hook(echo_version)


def test_bad_value_fails_when_the_hook_builds(host_conf: Any) -> None:
    host_conf("[apimw_etag]\nhmac_key = short\n", "", "[DEFAULT]\n")
    with pytest.raises(ConfigError, match=r"oslo.config \[apimw_etag\]: .*16 bytes"):
        etag.oslo_hook(echo_version)


def test_options_the_host_registered_itself_are_kept(host_conf: Any) -> None:
    conf = host_conf("[apimw_microversion]\nmin_version = 1.1\nmax_version = 1.9\n", "", "[DEFAULT]\n")
    conf.register_opt(cfg.StrOpt("service_type", default="baremetal"), group="apimw_microversion")
    app = microversion.oslo_hook(echo_version)
    again = microversion.oslo_hook(echo_version)  # a second pipeline: registering twice is fine
    for stack in (app, again):
        req = Request.blank("/", headers={"OpenStack-API-Version": "baremetal 1.9"})
        assert req.get_response(stack).json["version"] == "1.9"


def test_current_etag_is_not_an_oslo_option() -> None:
    ((group, opts),) = etag.list_opts()
    assert group == etag.GROUP == "apimw_etag"
    names = {opt.name for opt in opts}
    assert "current_etag" not in names and "hmac_key" in names


@pytest.mark.parametrize(
    ("auth_strategy", "scope", "refused"),
    [
        ("keystone", "shared", "auth_strategy = keystone"),
        ("http_basic", "project", "auth_strategy = http_basic"),
        ("noauth", "project", "scope = project"),
        ("noauth", "user", "scope = user"),
        ("noauth", "shared", None),
    ],
)
def test_ironic_hook_builds_idempotency_only_where_it_is_safe_outside_auth(
    host_conf: Any, auth_strategy: str, scope: str, refused: str | None
) -> None:
    """Ironic 39 applies ``[api] middleware`` outside its own authentication: a replay would be
    answered before auth runs, and a project or user scope would trust ``X-Project-Id`` that any
    caller can send (a caller with no credentials got another project's stored 201)."""
    conf = host_conf(f"[DEFAULT]\nauth_strategy = {auth_strategy}\n", "",
                     f"[apimw_idempotency]\nstore = memory://\nscope = {scope}\n")  # fmt: skip
    conf.register_opt(cfg.StrOpt("auth_strategy", default="keystone"))  # Ironic registers it
    if refused is None:
        app = idempotency.ironic_hook(echo_version)
        post = Request.blank("/v1/nodes", method="POST", headers={"X-Client-Token": "t"}, body=b"{}")
        assert post.get_response(app).status_int == 201
        again = Request.blank("/v1/nodes", method="POST", headers={"X-Client-Token": "t"}, body=b"{}")
        assert again.get_response(app).headers["Idempotent-Replayed"] == "true"
    else:
        with pytest.raises(ConfigError, match=refused):
            idempotency.ironic_hook(echo_version)


def test_ironic_hook_refuses_a_host_whose_authentication_it_cannot_tell(host_conf: Any) -> None:
    host_conf("", "", "[apimw_idempotency]\nstore = memory://\nscope = shared\n")
    with pytest.raises(ConfigError, match="auth_strategy"):
        idempotency.ironic_hook(echo_version)
