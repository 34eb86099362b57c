"""The sans-IO negotiation (apimw._microversion_negotiation): header values in, outcome out."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from apimw import ConfigError, HTTPProblem, Version, parse_version
from apimw._microversion_negotiation import Negotiator, Served

LEGACY = "X-OpenStack-Ironic-API-Version"
STD = "OpenStack-API-Version"

NEGOTIATOR = Negotiator(
    service_type="baremetal", min_version="1.1", max_version="1.99", legacy_header=LEGACY,
    service_aliases=["ironic"], error_profile="ironic",
)  # fmt: skip

VERSION_TEXT = st.one_of(
    st.sampled_from(["latest", "LATEST", "1.1", "1.50", "1.99", "1.100", "2.1", "1.01", "spam", ""]),
    st.builds(lambda a, b: f"{a}.{b}", st.integers(0, 3), st.integers(0, 130)),
)
ENTRY = st.builds(
    lambda service, text: f"{service} {text}".strip(),
    st.sampled_from(["baremetal", "BareMetal", "ironic", "compute", ""]),
    VERSION_TEXT,
)
STANDARD = st.one_of(st.none(), st.lists(ENTRY, max_size=3).map(", ".join), st.text(max_size=20))
LEGACY_VALUE = st.one_of(st.none(), VERSION_TEXT, st.lists(VERSION_TEXT, max_size=3).map(", ".join))


@settings(max_examples=300, deadline=None)
@given(standard=STANDARD, legacy=LEGACY_VALUE)
def test_the_forwarded_headers_negotiate_to_the_served_version(
    standard: str | None, legacy: str | None
) -> None:
    outcome = NEGOTIATOR.negotiate(standard, legacy)
    if isinstance(outcome, HTTPProblem):
        assert outcome.status in (400, 406)
        return
    forwarded = dict(outcome.request_headers)
    assert forwarded == {STD: f"baremetal {outcome.version}", LEGACY: str(outcome.version)}
    # whichever header the app reads, it reads the served version, and reading both agrees
    again = NEGOTIATOR.negotiate(forwarded[STD], forwarded[LEGACY])
    assert isinstance(again, Served) and again.version == outcome.version
    assert NEGOTIATOR.negotiate(None, forwarded[LEGACY]).version == outcome.version  # type: ignore[union-attr]
    assert NEGOTIATOR.negotiate(forwarded[STD], None).version == outcome.version  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("standard", "legacy", "expected"),
    [
        pytest.param(None, None, "1.1", id="no-header-is-minimum"),
        pytest.param("baremetal latest", None, "1.99", id="latest-is-maximum"),
        pytest.param("ironic 1.7", "latest", "1.7", id="alias-and-standard-wins"),
        pytest.param("compute 2.1", "1.8", "1.8", id="other-service-then-legacy"),
    ],
)
def test_a_served_outcome_carries_its_headers(
    standard: str | None, legacy: str | None, expected: str
) -> None:
    outcome = NEGOTIATOR.negotiate(standard, legacy)
    assert isinstance(outcome, Served)
    assert outcome.version == parse_version(expected)
    assert outcome.response_headers == (
        ("X-OpenStack-Ironic-API-Minimum-Version", "1.1"),
        ("X-OpenStack-Ironic-API-Maximum-Version", "1.99"),
        (LEGACY, expected),
        (STD, f"baremetal {expected}"),
    )
    assert outcome.request_headers == ((STD, f"baremetal {expected}"), (LEGACY, expected))


def test_a_service_without_a_legacy_header_forwards_the_standard_one() -> None:
    negotiator = Negotiator(service_type="compute", min_version="2.1", max_version="2.90")
    outcome = negotiator.negotiate("compute latest", "2.5")
    assert isinstance(outcome, Served)
    assert outcome.request_headers == ((STD, "compute 2.90"),)
    assert negotiator.vary == (STD,)


@pytest.mark.parametrize(
    ("standard", "legacy", "status", "code"),
    [
        pytest.param("baremetal 1.100", None, 406, "microversion.unsupported", id="above-max"),
        pytest.param(None, "1.x", 406, "microversion.malformed", id="malformed-legacy"),
        pytest.param("baremetal", None, 406, "microversion.malformed", id="no-version"),
    ],
)
def test_a_refused_outcome_is_the_problem_to_answer(
    standard: str | None, legacy: str | None, status: int, code: str
) -> None:
    outcome = NEGOTIATOR.negotiate(standard, legacy)
    assert isinstance(outcome, HTTPProblem)
    assert (outcome.status, outcome.code) == (status, code)


def test_the_negotiator_validates_its_configuration() -> None:
    with pytest.raises(ConfigError, match="pin_max_version"):
        Negotiator(service_type="baremetal", min_version="1.1", max_version="1.9", pin_max_version="1.10")


def test_the_names_moved_to_the_sans_io_module_stay_importable_from_microversion() -> None:
    from apimw import _microversion_negotiation as negotiation
    from apimw import _microversion_type as version_type
    from apimw.microversion import (
        CODE_MALFORMED,
        CODE_UNSUPPORTED,
        STANDARD_HEADER,
        Selection,
        parse_version,
        select_version,
    )
    from apimw.microversion import Version as MicroversionVersion

    assert select_version is negotiation.select_version
    assert Selection is negotiation.Selection
    assert (CODE_MALFORMED, CODE_UNSUPPORTED, STANDARD_HEADER) == (
        negotiation.CODE_MALFORMED, negotiation.CODE_UNSUPPORTED, negotiation.STANDARD_HEADER,
    )  # fmt: skip
    assert MicroversionVersion is version_type.Version is Version
    assert parse_version is version_type.parse_version
