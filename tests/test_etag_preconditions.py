"""RFC 9110 §13 preconditions through the etag middleware, on both doors: each one a request
carries is evaluated (against the etag and Last-Modified the app supplies, or by the app that
acknowledges enforcing it) or refused before the app runs; §13.2.2's precedence; 304 or 412
by method.  docs/conformance/etag.md names these tests row by row."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime
from typing import Any

import pytest
from webob import Request

from apimw.errors import HTTPProblem
from apimw.etag import (
    ENVIRON_IF_MATCH,
    ENVIRON_IF_NONE_MATCH,
    ENVIRON_IF_UNMODIFIED_SINCE,
    ETagMiddleware,
    IfUnmodifiedSince,
    StaleEtag,
    format_etag,
    mark_enforced,
    set_response_etag,
)
from apimw.microversion import MicroversionMiddleware
from tests.asgi_support import flavours, layered
from tests.wsgi import run

pytest_generate_tests = flavours()

LEGACY = "X-OpenStack-Ironic-API-Version"
MODIFIED = datetime(2026, 11, 1, 12, 0, 0, tzinfo=UTC)
EARLIER = format_datetime(MODIFIED - timedelta(days=1), usegmt=True)
LATER = format_datetime(MODIFIED + timedelta(days=1), usegmt=True)
SAME = format_datetime(MODIFIED, usegmt=True)
STALE = format_etag("0" * 16)


class Resources:
    """PUT/PATCH/GET/HEAD /v1/things/<name>: etags and modification dates, preconditions
    enforced as a data layer would (and acknowledged)."""

    def __init__(self) -> None:
        self.things: dict[str, dict[str, Any]] = {}
        self.calls = 0
        self.writes = 0
        self.save("t1", {"size": 1})

    def save(self, name: str, doc: dict[str, Any]) -> dict[str, Any]:
        version = len(self.things.get(name, {}).get("history", [])) + 1
        thing = {"doc": doc, "etag": format_etag(f"{name}-{version}"), "modified": MODIFIED,
                 "history": [*self.things.get(name, {}).get("history", []), doc]}  # fmt: skip
        self.things[name] = thing
        return thing

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        self.calls += 1
        method = environ["REQUEST_METHOD"]
        name = environ["PATH_INFO"].rsplit("/", 1)[-1]
        thing = self.things.get(name)
        if thing is None and method != "PUT":
            raise HTTPProblem(404, "thing.not-found", f"no thing {name}")
        if method in ("PATCH", "PUT", "DELETE"):
            if_match = environ.get(ENVIRON_IF_MATCH)
            unmodified: IfUnmodifiedSince | None = environ.get(ENVIRON_IF_UNMODIFIED_SINCE)
            if_none_match = environ.get(ENVIRON_IF_NONE_MATCH)
            if if_match is not None or unmodified is not None or if_none_match is not None:
                mark_enforced(environ)  # the checks below and the write are one step here
            current = None if thing is None else thing["etag"]
            if if_match is not None and not if_match.matches(current):
                raise StaleEtag()
            if unmodified is not None and thing is not None and not unmodified.holds(thing["modified"]):
                raise StaleEtag()
            if if_none_match is not None and if_none_match.matches(current):
                raise StaleEtag()  # §13.1.2: If-None-Match: * on a PUT creates only
            self.writes += 1
            body = json.loads(environ["wsgi.input"].read(int(environ.get("CONTENT_LENGTH") or 0)) or b"{}")
            thing = self.save(name, {**(thing["doc"] if thing and method == "PATCH" else {}), **body})
            status = "201 Created" if current is None else "200 OK"
        else:
            status = "200 OK"
        set_response_etag(environ, thing["etag"])
        body = json.dumps(thing["doc"]).encode()
        start_response(status, [("Content-Type", "application/json"), ("Content-Length", str(len(body))),
                                ("Last-Modified", format_datetime(thing["modified"], usegmt=True)),
                                ("Cache-Control", "private")])  # fmt: skip
        return [] if method == "HEAD" else [body]

    def lookup(self, request: dict[str, Any]) -> str | None:
        """``current_etag`` of the WSGI environ or the ASGI scope."""
        path = request["PATH_INFO"] if "PATH_INFO" in request else request["path"]
        thing = self.things.get(path.rsplit("/", 1)[-1])
        return None if thing is None else thing["etag"]


def stack(flavour: str, app: Resources, **options: Any) -> Any:
    options.setdefault("min_version", "1.40")
    options.setdefault("enforces", "*")
    microversion = {"service_type": "baremetal", "min_version": "1.1", "max_version": "1.50",
                    "legacy_header": LEGACY}  # fmt: skip
    return layered(flavour, app, (MicroversionMiddleware, microversion), (ETagMiddleware, options))


def req(method: str = "GET", path: str = "/v1/things/t1", version: str = "1.45", body: Any = None,
        **headers: str) -> Request:  # fmt: skip
    fields = {LEGACY: version, **{k.replace("_", "-"): v for k, v in headers.items()}}
    r = Request.blank(path, method=method, headers=fields)
    if body is not None:
        r.body = json.dumps(body).encode()
        r.content_type = "application/json"
    return r


def code(resp: Any) -> str:
    return str(resp.json["errors"][0]["code"])


# -- If-Unmodified-Since on a write: evaluated by the app, or refused --------------------------


def test_a_patch_with_only_if_unmodified_since_is_refused_under_the_ironic_profile(flavour: str) -> None:
    app = Resources()
    ironic = stack(flavour, app, compat="ironic")
    resp = run(ironic, req("PATCH", body={"size": 2}, If_Unmodified_Since=LATER))
    assert resp.status_int == 400 and code(resp) == "etag.if-unmodified-since-unsupported"
    assert app.calls == 0 and app.writes == 0


@pytest.mark.parametrize(
    ("date", "status", "writes"),
    [pytest.param(LATER, 200, 1, id="unmodified"), pytest.param(SAME, 200, 1, id="same-second"),
     pytest.param(EARLIER, 412, 0, id="modified-since")],
)  # fmt: skip
def test_if_unmodified_since_on_a_write_is_handed_to_the_app_that_enforces_it(
    flavour: str, date: str, status: int, writes: int
) -> None:
    app = Resources()
    on = stack(flavour, app, if_unmodified_since_on_writes=True)
    resp = run(on, req("PATCH", body={"size": 2}, If_Unmodified_Since=date))
    assert resp.status_int == status and app.writes == writes


def test_if_unmodified_since_handed_over_and_not_acknowledged_fails_closed(flavour: str) -> None:
    def careless(environ: dict[str, Any], start_response: Callable[..., Any]) -> list[bytes]:
        start_response("200 OK", [("Content-Type", "application/json")])
        return [b"{}"]

    on = stack(flavour, careless, if_unmodified_since_on_writes=True)  # type: ignore[arg-type]
    resp = run(on, req("PATCH", body={}, If_Unmodified_Since=LATER))
    assert resp.status_int == 500 and code(resp) == "etag.precondition-not-enforced"


def test_a_malformed_if_unmodified_since_on_a_write_is_400_not_ignored(flavour: str) -> None:
    app = Resources()
    on = stack(flavour, app, if_unmodified_since_on_writes=True)
    resp = run(on, req("PATCH", body={"size": 2}, If_Unmodified_Since="yesterday"))
    assert resp.status_int == 400 and code(resp) == "etag.if-unmodified-since-malformed"
    assert app.calls == 0


def test_if_unmodified_since_is_ignored_when_if_match_is_present(flavour: str) -> None:
    app = Resources()
    tag = app.things["t1"]["etag"]
    # refused alone (the default), but beside If-Match it is not evaluated (§13.1.4)
    resp = run(stack(flavour, app), req("PATCH", body={"size": 2}, If_Match=tag, If_Unmodified_Since=EARLIER))
    assert resp.status_int == 200 and app.writes == 1


def test_if_modified_since_on_a_write_is_ignored(flavour: str) -> None:
    app = Resources()
    resp = run(stack(flavour, app), req("PATCH", body={"size": 2}, If_Modified_Since=LATER))
    assert resp.status_int == 200 and app.writes == 1  # §13.1.3: only GET and HEAD


@pytest.mark.parametrize(
    ("header", "value"),
    [pytest.param("If_Unmodified_Since", LATER, id="if-unmodified-since"),
     pytest.param("If_None_Match", "*", id="if-none-match"), pytest.param("If_Match", STALE, id="if-match")],
)  # fmt: skip
def test_a_precondition_on_a_post_that_is_not_an_etag_method_is_refused(
    flavour: str, header: str, value: str
) -> None:
    app = Resources()
    resp = run(stack(flavour, app), req("POST", path="/v1/things", body={}, **{header: value}))
    assert resp.status_int == 400 and code(resp).endswith("-unsupported")
    assert app.calls == 0


@pytest.mark.parametrize("header", ["If_Unmodified_Since", "If_Match"])
def test_a_precondition_below_the_etag_version_is_406(flavour: str, header: str) -> None:
    app = Resources()
    on = stack(flavour, app, if_unmodified_since_on_writes=True)
    resp = run(on, req("PATCH", version="1.39", body={}, **{header: LATER if "Since" in header else STALE}))
    assert resp.status_int == 406 and app.calls == 0


# -- If-None-Match: * on a PUT: create only ------------------------------------------------------


def test_if_none_match_star_on_a_put_creates_only(flavour: str) -> None:
    app = Resources()
    on = stack(flavour, app, if_none_match_on_writes=True)
    created = run(on, req("PUT", path="/v1/things/t2", body={"size": 5}, If_None_Match="*"))
    assert created.status_int == 201
    again = run(on, req("PUT", path="/v1/things/t2", body={"size": 6}, If_None_Match="*"))
    assert again.status_int == 412 and code(again) == "etag.precondition-failed"
    assert app.things["t2"]["doc"] == {"size": 5}


def test_if_none_match_star_on_a_put_is_412_before_the_app_with_a_lookup(flavour: str) -> None:
    app = Resources()
    on = stack(flavour, app, if_none_match_on_writes=True, current_etag=app.lookup)
    resp = run(on, req("PUT", body={"size": 6}, If_None_Match="*"))
    assert resp.status_int == 412 and app.calls == 0


def test_if_none_match_on_a_put_is_400_under_the_ironic_profile(flavour: str) -> None:
    app = Resources()
    ironic = stack(flavour, app, compat="ironic")
    resp = run(ironic, req("PUT", path="/v1/things/t2", body={}, If_None_Match="*"))
    assert resp.status_int == 400 and code(resp) == "etag.if-none-match-unsupported"
    assert app.calls == 0


# -- GET and HEAD: evaluated on the app's answer -------------------------------------------------


@pytest.mark.parametrize("method", ["GET", "HEAD"])
@pytest.mark.parametrize(
    ("value", "status"),
    [pytest.param("current", 200, id="match"), pytest.param(STALE, 412, id="stale"),
     pytest.param("*", 200, id="star"), pytest.param(f"{STALE}, current", 200, id="second-in-list")],
)  # fmt: skip
def test_if_match_on_a_read_is_evaluated(flavour: str, method: str, value: str, status: int) -> None:
    app = Resources()
    value = value.replace("current", app.things["t1"]["etag"])
    resp = run(stack(flavour, app), req(method, If_Match=value))
    assert resp.status_int == status
    if status == 412:
        assert method == "HEAD" or code(resp) == "etag.precondition-failed"


def test_if_match_on_a_read_of_a_missing_resource_is_the_apps_404(flavour: str) -> None:
    resp = run(stack(flavour, Resources()), req(path="/v1/things/none", If_Match="*"))
    assert resp.status_int == 404


def test_a_stale_if_match_on_a_read_is_412_before_the_app_with_a_lookup(flavour: str) -> None:
    app = Resources()
    resp = run(stack(flavour, app, current_etag=app.lookup), req(If_Match=STALE))
    assert resp.status_int == 412 and app.calls == 0


@pytest.mark.parametrize(
    ("value", "status"),
    [pytest.param(LATER, 200, id="unmodified"), pytest.param(EARLIER, 412, id="modified"),
     pytest.param("not a date", 200, id="invalid-ignored")],
)  # fmt: skip
def test_if_unmodified_since_on_a_read_is_evaluated_against_last_modified(
    flavour: str, value: str, status: int
) -> None:
    resp = run(stack(flavour, Resources()), req(If_Unmodified_Since=value))
    assert resp.status_int == status


# -- precedence (RFC 9110 §13.2.2) and 304 -------------------------------------------------------


@pytest.mark.parametrize(
    ("headers", "status"),
    [
        pytest.param({"If_Match": "current", "If_None_Match": "current"}, 304, id="match-then-none-match"),
        pytest.param({"If_Match": STALE, "If_None_Match": "current"}, 412, id="if-match-first"),
        pytest.param(
            {"If_Match": "current", "If_Unmodified_Since": EARLIER}, 200, id="ius-only-without-if-match"
        ),
        pytest.param({"If_Unmodified_Since": EARLIER, "If_None_Match": "current"}, 412, id="ius-before-inm"),
        pytest.param({"If_None_Match": STALE, "If_Modified_Since": LATER}, 200, id="ims-only-without-inm"),
        pytest.param({"If_None_Match": "current"}, 304, id="inm"),
        pytest.param({"If_None_Match": "*"}, 304, id="inm-star"),
        pytest.param({"If_Modified_Since": LATER}, 304, id="ims-not-modified"),
        pytest.param({"If_Modified_Since": SAME}, 304, id="ims-same-second"),
        pytest.param({"If_Modified_Since": EARLIER}, 200, id="ims-modified"),
        pytest.param({"If_Modified_Since": "junk"}, 200, id="ims-invalid-ignored"),
    ],
)
def test_precedence_of_preconditions_on_a_get(flavour: str, headers: dict[str, str], status: int) -> None:
    app = Resources()
    tag = app.things["t1"]["etag"]
    resp = run(
        stack(flavour, app, not_modified=True),
        req(**{k: v.replace("current", tag) for k, v in headers.items()}),
    )
    assert resp.status_int == status
    if status == 304:
        # RFC 9110 §15.4.5: the fields a 200 would have sent that guide caches, and no body
        assert resp.headers["ETag"] == tag and resp.headers["Cache-Control"] == "private"
        assert resp.body == b""


def test_if_none_match_and_if_modified_since_on_a_get_are_ignored_under_the_ironic_profile(
    flavour: str,
) -> None:
    app = Resources()
    tag = app.things["t1"]["etag"]
    ironic = stack(flavour, app, compat="ironic")
    assert run(ironic, req(If_None_Match=tag)).status_int == 200
    assert run(ironic, req(If_Modified_Since=LATER)).status_int == 200
    rfc = stack(flavour, app)
    assert run(rfc, req(If_None_Match=tag)).status_int == 304
    assert run(rfc, req(If_Modified_Since=LATER)).status_int == 304


def test_a_false_if_none_match_is_304_on_a_get_and_412_on_a_put(flavour: str) -> None:
    app = Resources()
    tag = app.things["t1"]["etag"]
    on = stack(flavour, app, not_modified=True, if_none_match_on_writes=True)
    assert run(on, req(If_None_Match=tag)).status_int == 304
    put = run(on, req("PUT", body={"size": 3}, If_None_Match=tag))
    assert put.status_int == 412 and app.writes == 0


def test_412_and_428_are_problems_in_the_deployments_profile(flavour: str) -> None:
    app = Resources()
    on = stack(flavour, app, require_if_match=["PATCH"], error_profile="ironic")
    required = run(on, req("PATCH", body={}))
    assert required.status_int == 428 and required.headers["Cache-Control"] == "no-store"
    stale = run(on, req(If_Match=STALE))
    assert stale.status_int == 412 and "faultstring" in json.loads(stale.json["error_message"])
