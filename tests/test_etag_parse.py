"""If-Match / If-None-Match parsing and comparison (sans-IO), RFC 9110 §8.8.3 and §13.1."""

from __future__ import annotations

import etag as oracle  # the strict RFC 9110 reference implementation (PyPI "etag"), test-only
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from apimw.errors import HTTPProblem
from apimw.etag import format_etag, parse_if_match, parse_if_none_match, split_etag

# no per-example deadline or speed health check: the CI box is small and shared
RELAXED = settings(deadline=None, suppress_health_check=[HealthCheck.too_slow])
H = "a" * 127 + "f"  # a 128-hex digest
CURRENT = f'W/"{H}"'


@pytest.mark.parametrize(
    ("header", "any_", "tags"),
    [
        pytest.param(f'"{H}"', False, {H}, id="quoted-strong"),
        pytest.param(f'W/"{H}"', False, {H}, id="quoted-weak"),
        pytest.param('"x", "y"', False, {"x", "y"}, id="list-with-space"),
        pytest.param('"x","y"', False, {"x", "y"}, id="list-without-space"),
        pytest.param('W/"x" ,\t"y"', False, {"x", "y"}, id="list-ows-around-commas"),
        pytest.param(["W/\"x\"", '"y"'], False, {"x", "y"}, id="two-header-lines"),
        pytest.param(' "x" , , "y", ', False, {"x", "y"}, id="empty-elements-skipped"),
        pytest.param("*", True, set(), id="star"),
        pytest.param(" * ", True, set(), id="star-with-ows"),
        pytest.param("", False, set(), id="empty-value-is-empty-list"),
        pytest.param(" , ", False, set(), id="only-empty-elements"),
        pytest.param("*, ", True, set(), id="star-with-empty-elements"),
        pytest.param('""', False, {""}, id="empty-opaque-tag"),
        pytest.param('"a,b"', False, {"a,b"}, id="comma-inside-opaque-tag"),
        pytest.param('"\x80\xff"', False, {"\x80\xff"}, id="obs-text"),
    ],
)
def test_if_match_parses(header: str | list[str], any_: bool, tags: set[str]) -> None:
    cond = parse_if_match(header)
    assert cond is not None
    assert cond.any is any_
    assert cond.tags == tags


@pytest.mark.parametrize(
    "header",
    [
        pytest.param('*, "x"', id="star-mixed-with-tags"),
        pytest.param('"x", *', id="tag-then-star"),
        pytest.param(["*", "*"], id="star-on-two-lines"),
        pytest.param(H, id="bare-hex-unquoted"),
        pytest.param(f"W/{H}", id="spec-style-W-unquoted"),
        pytest.param('w/"x"', id="lowercase-weak-prefix"),
        pytest.param('"x" "y"', id="missing-comma"),
        pytest.param('"x', id="unterminated-quote"),
        pytest.param('"x y"', id="space-inside-quotes"),
        pytest.param('"x"y', id="junk-after-tag"),
        pytest.param('W/ "x"', id="space-after-W"),
        pytest.param("garbage", id="garbage"),
        pytest.param('"' + "a" * 9000 + '"', id="too-long"),
    ],
)
def test_if_match_malformed_is_400_never_absent(header: str | list[str]) -> None:
    with pytest.raises(HTTPProblem) as info:
        parse_if_match(header)
    assert info.value.status == 400
    assert info.value.code == "etag.if-match-malformed"


def test_absent_is_none() -> None:
    assert parse_if_match(None) is None
    assert parse_if_none_match(None) is None


@pytest.mark.parametrize(
    ("header", "expected"),
    [
        pytest.param(f"W/{H}", {H}, id="spec-W-unquoted"),
        pytest.param(H, {H}, id="bare-hex"),
        pytest.param(f'W/{H}, "z"', {H, "z"}, id="mixed-legacy-and-quoted"),
    ],
)
def test_unquoted_tolerated_when_enabled(header: str, expected: set[str]) -> None:
    cond = parse_if_match(header, accept_unquoted=True)
    assert cond is not None
    assert cond.tags == expected
    assert cond.matches(CURRENT) is (H in expected)


def test_unquoted_junk_still_malformed_when_tolerant() -> None:
    with pytest.raises(HTTPProblem):
        parse_if_match("not-hex!", accept_unquoted=True)


@pytest.mark.parametrize(
    ("header", "current", "weak_result", "strong_result"),
    [
        pytest.param(f'W/"{H}"', f'W/"{H}"', True, False, id="weak-vs-weak"),
        pytest.param(f'"{H}"', f'W/"{H}"', True, False, id="strong-vs-weak-current"),
        pytest.param(f'W/"{H}"', f'"{H}"', True, False, id="weak-vs-strong-current"),
        pytest.param(f'"{H}"', f'"{H}"', True, True, id="strong-vs-strong"),
        pytest.param(f'"{H}"', H, True, True, id="bare-stored-digest"),
        pytest.param(f'"x", W/"{H}"', f'W/"{H}"', True, False, id="second-in-list"),
        pytest.param('W/"other"', f'W/"{H}"', False, False, id="different"),
        pytest.param("", f'W/"{H}"', False, False, id="empty-list-matches-nothing"),
        pytest.param("*", f'W/"{H}"', True, True, id="star-existing"),
    ],
)
def test_comparison(header: str, current: str, weak_result: bool, strong_result: bool) -> None:
    weak_cond = parse_if_match(header)
    strong_cond = parse_if_match(header, strong=True)
    assert weak_cond is not None and strong_cond is not None
    assert weak_cond.matches(current) is weak_result
    assert strong_cond.matches(current) is strong_result


def test_star_on_missing_resource_is_false() -> None:
    cond = parse_if_match("*")
    assert cond is not None
    assert cond.matches(None) is False


@pytest.mark.parametrize("suffixes", [["-gzip"], "-gzip"])
def test_proxy_suffix_only_with_stripping(suffixes: str | list[str]) -> None:
    plain = parse_if_match(f'W/"{H}-gzip"')
    stripping = parse_if_match(f'W/"{H}-gzip"', ignore_suffixes=suffixes)
    assert plain is not None and stripping is not None
    assert not plain.matches(CURRENT)
    assert stripping.matches(CURRENT)
    # the suffix whole, never one of its characters
    other = parse_if_match(f'W/"{H}p"', ignore_suffixes=suffixes)
    assert other is not None and not other.matches(CURRENT)


def test_if_none_match_is_always_weak() -> None:
    inm = parse_if_none_match(f'"{H}"')
    assert inm is not None
    assert inm.matches(CURRENT)
    assert not inm.matches('W/"other"')
    with pytest.raises(HTTPProblem) as info:
        parse_if_none_match("nope")
    assert info.value.code == "etag.if-none-match-malformed"


def test_enforced_flag_is_per_request() -> None:
    first = parse_if_match('"x"')
    second = parse_if_match('"x"')
    assert first is not None and second is not None
    first.mark_enforced()
    assert first.enforced and not second.enforced


def test_split_and_format() -> None:
    assert format_etag(H) == CURRENT
    assert format_etag(H, weak=False) == f'"{H}"'
    assert split_etag(CURRENT) == (True, H)
    assert split_etag(f'"{H}"') == (False, H)
    assert split_etag(H) == (False, H)


_etagc = st.text(
    alphabet=st.sampled_from([chr(c) for c in [0x21, *range(0x23, 0x7F), *range(0x80, 0x100)]]),
    max_size=20,
)


@RELAXED
@given(
    st.lists(st.tuples(st.booleans(), _etagc), min_size=1, max_size=6),
    st.sampled_from([",", ", ", " ,\t"]),
)
def test_any_formatted_list_parses_back(tags: list[tuple[bool, str]], sep: str) -> None:
    header = sep.join(format_etag(opaque, weak=weak) for weak, opaque in tags)
    cond = parse_if_match(header)
    assert cond is not None
    assert not cond.any
    assert cond.tags == {opaque for _, opaque in tags}
    for weak, opaque in tags:
        assert cond.matches(format_etag(opaque, weak=weak))


@RELAXED
@given(st.text(max_size=40))
def test_parser_never_crashes(header: str) -> None:
    try:
        cond = parse_if_match(header)
    except HTTPProblem as problem:
        assert problem.status == 400
    else:
        assert cond is not None  # a present header is never "absent"


# -- differential: the same answers as the `etag` reference implementation ---------------------

_header_text = st.text(alphabet=list('"W/w, \t*ab\x80\\'), max_size=16)
_tag_list = st.lists(st.tuples(st.booleans(), st.sampled_from(["a", "b", "ab", "", "a,b"])), max_size=3).map(
    lambda tags: ", ".join(format_etag(opaque, weak=weak) for weak, opaque in tags)
)


@RELAXED
@given(st.one_of(_header_text, _tag_list), st.sampled_from(['W/"a"', '"a"', 'W/"b"', '"a,b"', 'W/""']))
@example('*, ', 'W/"a"')
@example("", 'W/"a"')
@example('"a", *', 'W/"a"')
def test_same_answers_as_the_reference_implementation(header: str, current: str) -> None:
    try:
        oracle.parse(header)
    except ValueError as exc:
        if "no entity-tag" in str(exc):
            # an empty list: the reference refuses to parse it but evaluates If-Match as false
            assert oracle.if_match(header, current) is False
            cond = parse_if_match(header)
            assert cond is not None and not cond.any and not cond.matches(current)
            return
        with pytest.raises(HTTPProblem):
            parse_if_match(header)
        return
    weak = parse_if_match(header)
    strong = parse_if_match(header, strong=True)
    assert weak is not None and strong is not None
    assert weak.any is oracle.is_wildcard(header)
    assert weak.matches(current) is oracle.matches(header, current, weak=True)
    assert strong.matches(current) is oracle.if_match(header, current)
