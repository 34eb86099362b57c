"""Deprecation signals: versions below a floor say they are going away.

``Deprecation`` (RFC 9745 §2: ``Deprecation = sf-date``, ``@<epoch seconds>``), ``Sunset``
(RFC 8594 §3: ``Sunset = HTTP-date``) and ``Link: <url>; rel="deprecation"`` (RFC 9745 §3)
on answers served below ``deprecated_below``; the discovery documents say which versions
are deprecated.  The answers are checked from the WSGI middleware and its ASGI twin.
"""

from __future__ import annotations

import email.utils
from collections.abc import Callable, Iterable
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from paste.deploy import loadapp
from webob import Request, Response

from apimw._microversion_deprecation import http_date, parse_date
from apimw.errors import ConfigError
from apimw.microversion import MicroversionMiddleware
from tests.asgi_support import flavours, layered
from tests.wsgi import run

pytest_generate_tests = flavours()

SINCE = "Thu, 01 Jan 2026 00:00:00 GMT"
SINCE_EPOCH = 1767225600  # date -d '2026-01-01T00:00:00Z' +%s
SUNSET = "Fri, 01 Jan 2027 00:00:00 GMT"
NOTICE = "https://docs.example.com/baremetal/deprecations#1.50"
DEPRECATION_HEADERS = ("Deprecation", "Sunset", "Link")
LEGACY = "X-OpenStack-Ironic-API-Version"


def node_app(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
    start_response("200 OK", [("Content-Type", "application/json")])
    return [b"{}"]


def app_factory(global_conf: dict[str, str], **local_conf: str) -> Any:
    """paste.app_factory of the ini below."""
    return node_app


def make(flavour: str = "wsgi", app: Any = node_app, **kw: Any) -> Any:
    options: dict[str, Any] = dict(
        service_type="baremetal", min_version="1.1", max_version="1.90", legacy_header=LEGACY,
        deprecated_below="1.50", deprecated_since=SINCE, sunset=SUNSET, deprecation_link=NOTICE,
    )  # fmt: skip
    options.update(kw)
    return layered(flavour, app, (MicroversionMiddleware, options))


def get(app: Any, version: str | None, path: str = "/v1/nodes") -> Response:
    headers = {} if version is None else {"OpenStack-API-Version": f"baremetal {version}"}
    return run(app, Request.blank(path, headers=headers, environ={"HTTP_HOST": "127.0.0.1:6385"}))


def signals(resp: Response) -> dict[str, list[str]]:
    return {name: resp.headers.getall(name) for name in DEPRECATION_HEADERS if name in resp.headers}


@pytest.mark.parametrize("version", ["1.1", "1.49", None], ids=["lowest", "just-below", "no-header"])
def test_below_the_floor_the_answer_carries_the_three_signals(flavour: str, version: str | None) -> None:
    resp = get(
        make(
            flavour,
        ),
        version,
    )
    assert resp.status_int == 200
    assert signals(resp) == {
        "Deprecation": [f"@{SINCE_EPOCH}"],
        "Sunset": [SUNSET],
        "Link": [f'<{NOTICE}>; rel="deprecation"'],
    }


@pytest.mark.parametrize("version", ["1.50", "1.90", "latest"])
def test_at_or_above_the_floor_there_is_no_signal(flavour: str, version: str) -> None:
    assert (
        signals(
            get(
                make(
                    flavour,
                ),
                version,
            )
        )
        == {}
    )


def test_refused_versions_carry_no_signal(flavour: str) -> None:
    resp = get(
        make(
            flavour,
        ),
        "1.91",
    )
    assert resp.status_int == 406
    assert signals(resp) == {}


def test_sunset_and_link_are_optional(flavour: str) -> None:
    resp = get(make(flavour, sunset=None, deprecation_link=None), "1.2")
    assert signals(resp) == {"Deprecation": [f"@{SINCE_EPOCH}"]}


@pytest.mark.parametrize(
    "since",
    [SINCE, "2026-01-01", "2026-01-01T00:00:00Z", f"@{SINCE_EPOCH}", SINCE_EPOCH,
     datetime(2026, 1, 1, tzinfo=UTC), datetime(2026, 1, 1, 1, tzinfo=timezone(timedelta(hours=1)))],
    ids=["http-date", "iso-date", "iso-time", "sf-date", "int", "datetime", "datetime-cet"],
)  # fmt: skip
def test_the_deprecation_date_forms(flavour: str, since: object) -> None:
    assert signals(get(make(flavour, deprecated_since=since, sunset=None), "1.2"))["Deprecation"] == [
        f"@{SINCE_EPOCH}"
    ]


def test_the_apps_own_signals_pass_above_the_floor_and_ours_replace_them_below(flavour: str) -> None:
    """RFC 9745 §2: at most one Deprecation field; the app's Link (pagination) stays beside ours."""

    def deprecating_app(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        start_response("200 OK", [("Content-Type", "application/json"), ("Deprecation", "@1"),
                                  ("Sunset", "Thu, 01 Jan 1970 00:00:01 GMT"),
                                  ("Link", '</v1/nodes?marker=x>; rel="next"')])  # fmt: skip
        return [b"{}"]

    app = make(flavour, deprecating_app)
    above = get(app, "1.60")
    assert signals(above) == {"Deprecation": ["@1"], "Sunset": ["Thu, 01 Jan 1970 00:00:01 GMT"],
                              "Link": ['</v1/nodes?marker=x>; rel="next"']}  # fmt: skip
    below = get(app, "1.2")
    assert signals(below) == {
        "Deprecation": [f"@{SINCE_EPOCH}"],
        "Sunset": [SUNSET],
        "Link": ['</v1/nodes?marker=x>; rel="next"', f'<{NOTICE}>; rel="deprecation"'],
    }


# -- discovery ------------------------------------------------------------------------------


def discovery(flavour: str, **kw: Any) -> Any:
    return make(flavour, discovery=True, discovery_resources=["nodes"], **kw)


@pytest.mark.parametrize("path", ["/", "/v1/"])
def test_discovery_names_the_floor_inside_the_range(flavour: str, path: str) -> None:
    doc = get(
        discovery(
            flavour,
        ),
        None,
        path,
    ).json
    entry = doc["versions"][0] if path == "/" else doc["version"]
    assert entry == {
        "id": "v1",
        "links": [
            {"href": "http://127.0.0.1:6385/v1/", "rel": "self"},
            {"href": NOTICE, "rel": "deprecation"},
        ],
        "status": "CURRENT",
        "min_version": "1.1",
        "version": "1.90",
        "max_version": "1.90",
        "deprecated_below": "1.50",
        "deprecated_since": SINCE,
        "sunset": SUNSET,
    }


def test_a_floor_above_the_maximum_deprecates_the_major_version(flavour: str) -> None:
    resp = get(discovery(flavour, deprecated_below="2.0", sunset=None, deprecation_link=None), "1.90", "/")
    entry = resp.json["versions"][0]
    assert entry["status"] == "DEPRECATED"
    assert "deprecated_below" not in entry and entry["deprecated_since"] == SINCE
    assert signals(resp) == {"Deprecation": [f"@{SINCE_EPOCH}"]}


def test_without_a_floor_discovery_is_unchanged(flavour: str) -> None:
    unset = dict.fromkeys(("deprecated_below", "deprecated_since", "sunset", "deprecation_link"))
    entry = get(discovery(flavour, **unset), None, "/").json["versions"][0]
    assert entry["status"] == "CURRENT"
    assert not {"deprecated_below", "deprecated_since", "sunset"} & set(entry)


# -- configuration ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("options", "message"),
    [
        pytest.param({"deprecated_since": None}, "deprecated_below needs deprecated_since", id="no-date"),
        pytest.param({"deprecated_below": "1.1"}, "deprecates nothing", id="floor-at-min"),
        pytest.param({"deprecated_below": "1.x"}, "deprecated_below", id="bad-floor"),
        pytest.param({"sunset": "2025-12-31"}, "sunset .* is before deprecated_since", id="sunset-first"),
        pytest.param({"deprecated_since": "tuesday"}, "deprecated_since: expected an HTTP", id="bad-date"),
        pytest.param({"deprecated_since": "2026-02-30"}, "deprecated_since: expected", id="no-such-day"),
        pytest.param({"deprecated_since": datetime(2026, 1, 1)}, "needs a time zone", id="naive-datetime"),
        pytest.param({"deprecation_link": "docs/deprecations"}, "absolute URL", id="relative-link"),
        pytest.param({"deprecation_link": "https://x/a b"}, "absolute URL", id="space-in-link"),
        pytest.param({"deprecation_link": "https://x/>; rel=next"}, "absolute URL", id="link-injection"),
        pytest.param({"deprecated_below": None}, "need deprecated_below", id="date-without-floor"),
        # an HTTP-date's year has four digits (RFC 9110 §5.6.7): Sunset and discovery's dates
        pytest.param({"sunset": "@999999999999999"}, "sunset: .*year 9999", id="sunset-past-9999"),
        pytest.param({"deprecated_since": "@253402300800", "sunset": None}, "deprecated_since: .*year 9999",
                     id="since-past-9999"),
        pytest.param({"deprecated_since": 10**20, "sunset": None}, "deprecated_since: .*year 9999",
                     id="int-past-sf-integer"),
        pytest.param({"deprecated_since": "@-62135596801"}, "deprecated_since: .*year 1", id="before-year-1"),
    ],
)  # fmt: skip
def test_bad_deprecation_options_fail_at_construction(options: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        make(**options)


def test_the_paste_ini_form(tmp_path: Path) -> None:
    ini = tmp_path / "api-paste.ini"
    ini.write_text(
        "[pipeline:main]\npipeline = microversion app\n\n"
        "[filter:microversion]\nuse = egg:apimw#microversion\nservice_type = baremetal\n"
        "min_version = 1.1\nmax_version = 1.90\ndeprecated_below = 1.50\n"
        f"deprecated_since = 2026-01-01\nsunset = 2027-01-01\ndeprecation_link = {NOTICE}\n\n"
        "[app:app]\npaste.app_factory = tests.test_microversion_deprecation:app_factory\n"
    )
    app = loadapp(f"config:{ini}")
    assert signals(get(app, "1.49")) == {
        "Deprecation": [f"@{SINCE_EPOCH}"], "Sunset": [SUNSET], "Link": [f'<{NOTICE}>; rel="deprecation"'],
    }  # fmt: skip
    assert signals(get(app, "1.50")) == {}


@given(st.integers(min_value=-(10**10), max_value=253402300799))  # up to 9999-12-31T23:59:59Z
def test_http_dates_are_the_stdlibs_and_read_back(epoch: int) -> None:
    if epoch >= -62135596800:  # the stdlib formats years from 1 on
        assert http_date(epoch) == email.utils.formatdate(epoch, usegmt=True)
        assert parse_date("sunset", http_date(epoch)) == epoch
    assert parse_date("sunset", f"@{epoch}") == epoch
