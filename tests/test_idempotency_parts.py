"""Sans-IO identity (tokens, keys, fingerprints), records, and the three ways to configure."""

from __future__ import annotations

import json
import random
import re
import textwrap
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from apimw import _idempotency_identity as identity
from apimw import _idempotency_records as records
from apimw._canonical_json import canonical_ascii_json
from apimw._stores.memcached_store import THIRTY_DAYS, memcached_expire
from apimw.errors import ConfigError
from apimw.idempotency import GROUP, OPTIONS, IdempotencyMiddleware, filter_factory, list_opts, wrap_flask
from tests.idempotency_support import CreateApp, post

# visible ASCII but the comma (the separator of a repeated header's joined lines)
VISIBLE = st.text(
    alphabet=st.characters(min_codepoint=0x21, max_codepoint=0x7E, exclude_characters=","),
    min_size=1,
    max_size=255,
)
JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4),
    max_leaves=12,
)


def fp(body: bytes, **kw: Any) -> str:
    args: dict[str, Any] = {"method": "POST", "path": "/v1/nodes", "query": "",
                            "content_type": "application/json", "versions": [], "body": body}  # fmt: skip
    args.update(kw)
    return identity.fingerprint(**args)


def shuffled(doc: Any, rng: random.Random) -> Any:
    if isinstance(doc, dict):
        items = list(doc.items())
        rng.shuffle(items)
        return {k: shuffled(v, rng) for k, v in items}
    if isinstance(doc, list):
        return [shuffled(v, rng) for v in doc]
    return doc


ANY_JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.integers(min_value=2**63 - 2, max_value=2**70)
    | st.floats()
    | st.text(st.characters(blacklist_categories=()), max_size=8),
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(st.text(st.characters(blacklist_categories=()), max_size=6), inner, max_size=4)
    ),
    max_leaves=20,
)


@settings(max_examples=300, deadline=None)
@given(doc=ANY_JSON, indent=st.sampled_from([None, 1]), ascii_only=st.booleans())
def test_a_json_body_is_fingerprinted_in_its_sorted_compact_ascii_form(
    doc: Any, indent: int | None, ascii_only: bool
) -> None:
    """Fingerprints are stored: the canonical form is ``json.dumps`` with sorted keys, compact
    separators and ASCII escapes, of any document however it was written, and its own canonical form."""
    body = json.dumps(doc, indent=indent, ensure_ascii=ascii_only).encode("utf-8", "surrogatepass")
    text = json.dumps(json.loads(body), sort_keys=True, separators=(",", ":")).encode()
    assert text.isascii()
    assert identity.canonical_body("application/json", body) == b"json:" + text
    assert canonical_ascii_json(text) == text


@settings(max_examples=150, deadline=None)
@given(doc=JSON, seed=st.integers(0, 2**16))
def test_json_key_order_and_whitespace_never_change_the_fingerprint(doc: Any, seed: int) -> None:
    compact = json.dumps(doc).encode()
    loose = json.dumps(shuffled(doc, random.Random(seed)), indent=3, ensure_ascii=False).encode()
    assert fp(compact) == fp(loose)


@settings(max_examples=100, deadline=None)
@given(a=JSON, b=JSON)
def test_different_json_documents_have_different_fingerprints(a: Any, b: Any) -> None:
    same = json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True)
    assert (fp(json.dumps(a).encode()) == fp(json.dumps(b).encode())) == same


@pytest.mark.parametrize(
    "change",
    [pytest.param({"method": "PUT"}, id="method"), pytest.param({"path": "/v1/ports"}, id="path"),
     pytest.param({"query": "a=1"}, id="query"), pytest.param({"content_type": "text/plain"}, id="type"),
     pytest.param({"versions": [("HTTP_OPENSTACK_API_VERSION", "baremetal 1.2")]}, id="version"),
     pytest.param({"body": b'{"a": 2}'}, id="body")],
)  # fmt: skip
def test_each_part_of_the_request_counts(change: dict[str, Any]) -> None:
    assert fp(b'{"a": 1}') != fp(change.pop("body", b'{"a": 1}'), **change)


def test_query_bytes_are_kept_distinct_and_order_does_not_matter() -> None:
    assert fp(b"", query="a=%FF") != fp(b"", query="a=%FE")
    assert fp(b"", query="a=1&b=2") == fp(b"", query="b=2&a=1")
    assert fp(b"", query="a=") != fp(b"", query="")


def test_non_json_bodies_are_compared_raw() -> None:
    assert fp(b"{not json") != fp(b"{not  json")
    assert fp(b'{"a":1}', content_type="text/plain") != fp(b'{"a": 1}', content_type="text/plain")


@given(scope=st.text(max_size=300), token=VISIBLE)
def test_store_key_is_short_ascii_and_never_holds_the_token(scope: str, token: str) -> None:
    key = identity.store_key("apimw:", scope, token)
    assert re.fullmatch(r"apimw:idem:v1:[0-9a-f]{64}", key)
    assert len(key.encode()) <= 250
    assert identity.store_key("apimw:", scope + "x", token) != key


@given(token=VISIBLE)
def test_idempotency_key_quoted_or_bare_is_the_same_token(token: str) -> None:
    quoted = '"' + token.replace("\\", "\\\\").replace('"', '\\"') + '"'
    assert identity.parse_idempotency_key(quoted) == token
    if not token.startswith('"'):
        assert identity.parse_idempotency_key(token) == token
    assert identity.resolve_token(token, quoted) == token


@pytest.mark.parametrize("raw", ['"unterminated', '"bad \\x escape"', '"a";param=1', '""', '"with space"'])
def test_malformed_idempotency_keys(raw: str) -> None:
    with pytest.raises(identity.TokenError) as info:
        identity.parse_idempotency_key(raw)
    assert info.value.code == "idempotency.token-invalid"


def test_record_round_trip_keeps_binary_bodies_and_header_order() -> None:
    owner = b"0" * 32
    headers = [("Location", "/v1/nodes/1"), ("X-Multi", "a"), ("X-Multi", "b")]
    raw = records.encode_complete(owner, "f" * 64, "scope", "201 Created", headers, b"\x00\n\xff\r\n")
    rec = records.decode_record(raw)
    assert (rec.state, rec.status, rec.headers, rec.body) == (records.COMPLETE, "201 Created", headers,
                                                              b"\x00\n\xff\r\n")  # fmt: skip
    tomb = records.decode_record(records.encode_tombstone(owner, "f" * 64, "scope", "201 Created", "/x"))
    assert (tomb.state, tomb.location) == (records.TOMBSTONE, "/x")
    too_deep = owner + b"C" + b"[" * 100_000 + b"\n"
    for garbage in (b"", b"x" * 40, owner + b"Q{}\n", owner + b"C{\n", owner + b'C{"v":2}\n', too_deep):
        with pytest.raises(records.RecordError):
            records.decode_record(garbage)


ANY_TEXT = st.text(st.characters(blacklist_categories=()), max_size=12)  # lone surrogates too


@given(
    headers=st.lists(st.tuples(ANY_TEXT, ANY_TEXT | st.sampled_from(["caf\u00e9", "\ud800x"])), max_size=5),
    scope=ANY_TEXT.filter(bool),
    body=st.binary(max_size=64),
)
def test_any_header_text_and_scope_survive_a_record_round_trip(
    headers: list[tuple[str, str]], scope: str, body: bytes
) -> None:
    """Non-ASCII and even lone surrogates come back unchanged."""
    raw = records.encode_complete(b"0" * 32, "f" * 64, scope, "201 Created", headers, body)
    rec = records.decode_record(raw)
    assert (rec.scope, rec.status, rec.headers, rec.body) == (scope, "201 Created", headers, body)


@pytest.mark.parametrize(
    "seconds, expected",
    [pytest.param(0.3, 2, id="sub-second-becomes-2"), pytest.param(1, 2, id="1-becomes-2"),
     pytest.param(2.1, 3, id="rounded-up"), pytest.param(THIRTY_DAYS, THIRTY_DAYS, id="30-days-relative"),
     pytest.param(THIRTY_DAYS + 1, 1_000_000_000 + THIRTY_DAYS + 1, id="over-30-days-absolute")],
)  # fmt: skip
def test_memcached_expire(seconds: float, expected: int) -> None:
    assert memcached_expire(seconds, now=1_000_000_000) == expected


# -- configuration ------------------------------------------------------------------------


def test_paste_deploy_pipeline(tmp_path: Path) -> None:
    from paste.deploy import loadapp

    ini = tmp_path / "api-paste.ini"
    ini.write_text(
        textwrap.dedent("""
        [pipeline:main]
        pipeline = idempotency app

        [filter:idempotency]
        use = call:apimw.idempotency:filter_factory
        store = memory://
        methods = POST, PUT
        lease = 5
        retention = 60
        mismatch_status = 422
        accept_idempotency_key = false

        [app:app]
        use = call:tests.test_idempotency_parts:app_factory
    """)
    )
    app = loadapp(f"config:{ini}")
    first = post(app, "t1")
    assert post(app, "t1").body == first.body
    assert post(app, "t1", body=b"{}").status == 422
    assert post(app, "t2", method="PUT").status == 201
    assert post(app, None, headers={"Idempotency-Key": "k"}).status == 201  # header not accepted here
    assert post(app, None, headers={"Idempotency-Key": "k"}).header("Idempotent-Replayed") is None


def app_factory(global_conf: dict[str, str], **local: str) -> CreateApp:
    return CreateApp()


def test_paste_entry_point_egg_apimw_idempotency(tmp_path: Path) -> None:
    from paste.deploy import loadapp

    ini = tmp_path / "egg.ini"
    ini.write_text(
        textwrap.dedent("""
        [pipeline:main]
        pipeline = idempotency app

        [filter:idempotency]
        use = egg:apimw#idempotency
        missing_scope = shared

        [app:app]
        use = call:tests.test_idempotency_parts:app_factory
    """)
    )
    app = loadapp(f"config:{ini}")
    first = post(app, "egg", project=None)
    assert post(app, "egg", project=None).body == first.body


@pytest.mark.parametrize(
    "conf",
    [{"lease": "0"}, {"retention": "-1"}, {"methods": ""}, {"mismatch_status": "418"},
     {"on_store_error": "maybe"}, {"scope": "nobody"}, {"missing_scope": "allow"}, {"key_prefix": "a b"},
     {"release_statuses": "600"}, {"store": "ftp://x"}, {"error_profile": "xml"}, {"no_such": "1"},
     {"fingerprint_headers": "Bad Header"}, {"max_response_bytes": "10"}, {"replay_header": "a b"}],
)  # fmt: skip
def test_bad_configuration_fails_at_pipeline_load(conf: dict[str, str]) -> None:
    with pytest.raises(ConfigError):
        filter_factory({}, **conf)(CreateApp())


def test_scope_function_by_import_path() -> None:
    mw = IdempotencyMiddleware(CreateApp(), scope="tests.test_idempotency_parts:domain_scope")
    first = post(mw, "t", project=None, headers={"X-Domain-Id": "d1"})
    assert post(mw, "t", project=None, headers={"X-Domain-Id": "d1"}).body == first.body
    assert post(mw, "t", project=None, headers={"X-Domain-Id": "d2"}).body != first.body


def domain_scope(environ: dict[str, Any]) -> str | None:
    return environ.get("HTTP_X_DOMAIN_ID")


def test_flask_wrapper_reads_app_config_then_overrides() -> None:
    import flask

    app = flask.Flask("idem")
    app.config["APIMW_IDEMPOTENCY"] = {"store": "memory://", "lease": "5", "mismatch_status": "422"}
    calls: list[int] = []

    @app.post("/v1/nodes")
    def create() -> Any:
        calls.append(1)
        return {"serial": len(calls)}, 201

    wrap_flask(app, missing_scope="shared")
    client = app.test_client()
    first = client.post("/v1/nodes", json={"a": 1}, headers={"X-Client-Token": "f1"})
    again = client.post("/v1/nodes", json={"a": 1}, headers={"X-Client-Token": "f1"})
    other = client.post("/v1/nodes", json={"a": 2}, headers={"X-Client-Token": "f1"})
    assert first.status_code == 201 and again.data == first.data
    assert again.headers["Idempotent-Replayed"] == "true"
    assert other.status_code == 422
    assert calls == [1]


def test_oslo_config_options(tmp_path: Path) -> None:
    from oslo_config import cfg

    from apimw._config import from_oslo

    groups = dict(list_opts())
    names = {opt.name for opt in groups[GROUP]}
    assert names == {opt.name for opt in OPTIONS if opt.oslo}  # metrics names code: not oslo
    conf_file = tmp_path / "svc.conf"
    conf_file.write_text(f"[{GROUP}]\nstore = memory://oslo\nlease = 7.5\nmethods = POST,PATCH\n"
                         "release_statuses = 429,503\n")  # fmt: skip
    conf = cfg.ConfigOpts()
    conf(["--config-file", str(conf_file)], project="svc")
    kwargs = from_oslo(OPTIONS, conf, GROUP)
    assert kwargs["lease"] == 7.5 and kwargs["methods"] == ["POST", "PATCH"]
    mw = IdempotencyMiddleware(CreateApp(status="503 Service Unavailable"), **kwargs, store_5xx=False)
    assert post(mw, "t", method="PATCH").status == 503  # PATCH is protected, 503 released
    assert post(mw, "t", method="PATCH").header("Idempotent-Replayed") is None


def test_options_table_documents_every_option() -> None:
    doc = (Path(__file__).resolve().parent.parent / "docs" / "idempotency.md").read_text()
    for opt in OPTIONS:
        assert f"`{opt.name}`" in doc, opt.name


# Records as earlier releases stored them: header text written as raw UTF-8 or as \u escapes.
_STORED_BEFORE = [
    (
        b"ooooooooooooooooooooooooooooooooC"
        b'{"v":1,"fp":"fp1","sc":"proj","s":"201 Created","h":[["Location","/v1/nodes/1"],'
        b'["X-Odd","\xc3\xa9\xe2\x80\xa8"]]}\n{"a": 1}',
        records.Record(b"o" * 32, records.COMPLETE, "fp1", "proj", "201 Created",
                       [("Location", "/v1/nodes/1"), ("X-Odd", "\u00e9\u2028")], b'{"a": 1}'),
    ),
    (
        b"ooooooooooooooooooooooooooooooooC"
        b'{"v":1,"fp":"fp1","sc":"proj","s":"201 Created","h":[["Location","/v1/nodes/1"],'
        b'["X-Odd","\\u00e9\\u2028"],["X-Lone","\\ud800"]]}\n{"a": 1}',
        records.Record(b"o" * 32, records.COMPLETE, "fp1", "proj", "201 Created",
                       [("Location", "/v1/nodes/1"), ("X-Odd", "\u00e9\u2028"), ("X-Lone", "\ud800")],
                       b'{"a": 1}'),
    ),
    (
        b'ooooooooooooooooooooooooooooooooP{"v":1,"fp":"fp2","sc":"proj","t":1765000000.123}\n',
        records.Record(b"o" * 32, records.PENDING, "fp2", "proj"),
    ),
    (
        b'ooooooooooooooooooooooooooooooooT{"v":1,"fp":"fp3","sc":"proj","s":"201 Created",'
        b'"loc":"/v1/nodes/\xc3\xa9"}\n',
        records.Record(b"o" * 32, records.TOMBSTONE, "fp3", "proj", "201 Created",
                       location="/v1/nodes/\u00e9"),
    ),
    (
        b'ooooooooooooooooooooooooooooooooT{"v":1,"fp":"fp3","sc":"proj","s":"500 Internal Server Error",'
        b'"loc":null}\n',
        records.Record(b"o" * 32, records.TOMBSTONE, "fp3", "proj", "500 Internal Server Error"),
    ),
]  # fmt: skip


@pytest.mark.parametrize(("raw", "expected"), _STORED_BEFORE, ids=["utf-8", "escaped", "pending", "tombstone",
                                                                   "tombstone-without-location"])  # fmt: skip
def test_records_stored_by_earlier_releases_still_decode(raw: bytes, expected: records.Record) -> None:
    assert records.decode_record(raw) == expected


def test_a_record_head_is_compact_json_with_ascii_escapes() -> None:
    raw, rec = _STORED_BEFORE[1]
    assert records.encode_complete(rec.owner, rec.fp, rec.scope, rec.status, rec.headers, rec.body) == raw


_OWNER = b"o" * (records.PREFIX_LEN - 1)


@pytest.mark.parametrize(
    ("current", "verdict"),
    [
        pytest.param(b"", records.IN_FLIGHT, id="vanished"),
        pytest.param(b"not a record", records.UNREADABLE, id="unreadable"),
        pytest.param(records.encode_pending(_OWNER, "fp", "p", 0.0), records.IN_FLIGHT, id="pending"),
        pytest.param(records.encode_pending(_OWNER, "other", "p", 0.0), records.MISMATCH, id="other-request"),
        pytest.param(records.encode_complete(_OWNER, "fp", "q", "201 Created", [], b""), records.MISMATCH,
                     id="other-scope"),
        pytest.param(records.encode_tombstone(_OWNER, "fp", "p", "201 Created", "/x"), records.TOMBSTONED,
                     id="tombstone"),
        pytest.param(records.encode_complete(_OWNER, "fp", "p", "201 Created", [("A", "b")], b"{}"),
                     records.REPLAY, id="complete"),
    ],
)  # fmt: skip
def test_what_a_found_record_answers(current: bytes, verdict: str) -> None:
    """The protocol's decision for a request that lost the claim, without WSGI or a store."""
    judged = records.judge(current, "fp", "p")
    assert judged.verdict == verdict
    if verdict == records.REPLAY:
        assert judged.record is not None
        assert (judged.record.headers, judged.record.body) == ([("A", "b")], b"{}")


def test_the_environ_key_names() -> None:
    from apimw import idempotency

    for name, key in (("CLIENT_TOKEN", "HTTP_X_CLIENT_TOKEN"), ("IDEMPOTENCY_KEY", "HTTP_IDEMPOTENCY_KEY"),
                      ("PROJECT_ID", "HTTP_X_PROJECT_ID"), ("TENANT_ID", "HTTP_X_TENANT_ID"),
                      ("USER_ID", "HTTP_X_USER_ID"),
                      ("IDENTITY_STATUS", "HTTP_X_IDENTITY_STATUS")):  # fmt: skip
        assert getattr(idempotency, f"ENVIRON_{name}") == key
        assert not hasattr(idempotency, f"ENV_{name}")
    assert idempotency.CLIENT_TOKEN_HEADER == "X-Client-Token"
    assert idempotency.REPLAYED_HEADER == "Idempotent-Replayed"
