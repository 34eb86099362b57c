"""The strict microversion parser."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from apimw import Version, VersionParseError, parse_version


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        pytest.param("1.0", Version(1, 0), id="zero-minor"),
        pytest.param("1.1", Version(1, 1), id="plain"),
        pytest.param("1.115", Version(1, 115), id="three-digit-minor"),
        pytest.param("2.90", Version(2, 90), id="major-2"),
        pytest.param("10.10", Version(10, 10), id="two-digit-major"),
    ],
)
def test_valid_versions_parse(text: str, expected: Version) -> None:
    assert parse_version(text) == expected
    assert str(parse_version(text)) == text


@pytest.mark.parametrize(
    "text",
    [
        pytest.param("", id="empty"),
        pytest.param("1", id="no-minor"),
        pytest.param("1.", id="dangling-dot"),
        pytest.param(".1", id="no-major"),
        pytest.param("0.1", id="zero-major"),
        pytest.param("01.1", id="leading-zero-major"),
        pytest.param("1.01", id="leading-zero-minor"),
        pytest.param("+1.1", id="plus-sign"),
        pytest.param("-1.1", id="minus-sign"),
        pytest.param("1.1_0", id="underscore-int-literal"),
        pytest.param("1.1.1", id="three-parts"),
        pytest.param("1.2.3.4.5", id="use-case-4-dotted"),
        pytest.param("spam", id="use-case-4-spam"),
        pytest.param("l33t", id="use-case-4-l33t"),
        pytest.param("latest", id="latest-is-not-a-version"),
        pytest.param(" 1.1", id="leading-space"),
        pytest.param("1.1 ", id="trailing-space"),
        pytest.param("1.1\n", id="trailing-newline"),
        pytest.param("\u0661.\u0661", id="arabic-indic-digits"),
        pytest.param("\uff11.\uff11", id="fullwidth-digits"),
        pytest.param("1." + "1" * 20, id="too-long"),
    ],
)
def test_malformed_versions_raise_our_error(text: str) -> None:
    with pytest.raises(VersionParseError):
        parse_version(text)


def test_non_string_raises_our_error() -> None:
    with pytest.raises(VersionParseError):
        parse_version(1.1)  # type: ignore[arg-type]


def test_versions_compare_numerically_not_lexically() -> None:
    assert parse_version("1.10") > parse_version("1.9")
    assert parse_version("2.0") > parse_version("1.115")
    assert parse_version("1.5").matches(Version(1, 5), Version(1, 5))
    assert not parse_version("1.4").matches(Version(1, 5))
    assert not parse_version("1.6").matches(None, Version(1, 5))


@given(st.text(max_size=40))
def test_parser_only_ever_raises_our_error(text: str) -> None:
    try:
        version = parse_version(text)
    except VersionParseError:
        return
    # Whatever it accepted is canonical ASCII MAJOR.MINOR and round-trips exactly.
    assert text.isascii()
    assert str(version) == text
    assert version.major >= 1 and version.minor >= 0


@given(st.integers(min_value=1, max_value=10**6), st.integers(min_value=0, max_value=10**6))
def test_every_canonical_version_round_trips(major: int, minor: int) -> None:
    text = f"{major}.{minor}"
    if len(text) <= 16:
        assert parse_version(text) == Version(major, minor)


@given(
    st.from_regex(r"[1-9][0-9]{0,3}\.(0|[1-9][0-9]{0,3})", fullmatch=True),
    st.sampled_from(["\n", " ", "\t", "\r\n", "x"]),
)
def test_trailing_junk_is_never_accepted(text: str, junk: str) -> None:
    with pytest.raises(VersionParseError):
        parse_version(text + junk)
