"""The canonical JSON's exact bytes, pinned: stored etags and replay fingerprints hash them."""

from __future__ import annotations

import datetime as dt
import uuid
from decimal import Decimal
from typing import Any

import pytest

from apimw._canonical_json import canonical_ascii_json, canonical_json

PLUS_TWO = dt.timezone(dt.timedelta(hours=2))
MINUS_FIVE_THIRTY = dt.timezone(-dt.timedelta(hours=5, minutes=30))

#: Documents an etag is computed over, one kind of value each, then all of them together.
DOCUMENTS: dict[str, Any] = {
    "naive-datetime": {"t": dt.datetime(2026, 5, 1, 12, 0, 0, 123456)},
    "naive-datetime-whole-second": {"t": dt.datetime(2026, 5, 1, 12, 0, 0)},
    "aware-utc-datetime": {"t": dt.datetime(2026, 5, 1, 12, 0, 0, 5, tzinfo=dt.UTC)},
    "aware-offset-datetime": {"t": dt.datetime(2026, 5, 1, 14, 30, 0, 987654, tzinfo=PLUS_TWO)},
    "aware-negative-offset-past-midnight": {"t": dt.datetime(2026, 12, 31, 20, 0, tzinfo=MINUS_FIVE_THIRTY)},
    "date-and-time": {
        "d": dt.date(2026, 5, 1),
        "tm": dt.time(12, 30, 1, 7),
        "tz": dt.time(8, 0, tzinfo=dt.UTC),
    },
    "integral-floats": {"a": 100.0, "b": -3.0, "c": 0.0, "d": -0.0, "e": 2.0**53 - 1, "f": -(2.0**52)},
    "floats-at-and-beyond-2**53": {"a": 2.0**53, "b": 2.0**53 + 2, "c": 1e16, "d": -(2.0**60), "e": 1e300},
    "non-integral-floats": {
        "a": 0.1,
        "b": 2.5,
        "c": 1e-7,
        "d": 1.5e-7,
        "e": 5e-324,
        "f": -1.7976931348623157e308,
    },
    "ints": {"a": 0, "b": -1, "c": 2**53 + 1, "d": 2**63 - 1, "e": -(2**63), "f": 2**64, "g": -(2**80)},
    "sets": {"s": {"b", "a", "c", "é"}, "f": frozenset({3, -1, 2}), "e": set()},
    "uuids": {"u": uuid.UUID(int=5), "m": uuid.UUID("1be26c0b-03f2-4d2e-ae87-c02d7f33c123")},
    "decimals": {"a": Decimal("100.0"), "b": Decimal("0.5"), "c": Decimal("-7"), "d": Decimal("1E+20")},
    "non-ascii": {"é": "node-é", "日本": "\u2028\u2029", "emoji": "\U0001f600", "bom": "\ufeff\uffff"},
    "control-characters": {"c": "\x00\x01\x08\x09\x0a\x0c\x0d\x1f\x7f\x80\x9f", "q": '"\\/'},
    "key-order": {"b": 1, "a": 2, "B": 3, "": 4, "aa": 5, "\x7f": 6, "é": 7, "\ue000": 8, "\U00010000": 9},
    "int-keys": {1: "one", "2": "two", -3: "minus three"},
    "tuples-and-empties": {"t": (1, (2, 3), ()), "l": [], "d": {}, "n": None, "y": True, "f": False},
    "nested": {
        "z": {
            "y": [{"b": 2.5, "a": (dt.datetime(2026, 1, 1), {uuid.UUID(int=1).hex})}],
            "x": {"w": {"v": [[[]]]}},
        },
        "a": [Decimal("1.25"), {"k": frozenset({"q", "p"})}, 1e16, "é\x1f"],
    },
}
DOCUMENTS["all-together"] = {name.replace("-", "_"): doc for name, doc in DOCUMENTS.items()}

#: Request bodies the idempotency fingerprint writes back in its canonical ASCII form.
BODIES: dict[str, bytes] = {
    "object": b'{"b": [1, {"y": null, "x": true}], "a": "t\\u00e9xt"}',
    "floats": b"[1.5, 100.0, 1e16, 1E+2, -0.0, 0.1, 2.5e-7, 1e300, 5e-324]",
    "big-ints": (
        b'{"big": 123456789012345678901234, "neg": -18446744073709551616, "max": 9223372036854775807}'
    ),
    "utf-8-text": '{"é": "日本", "emoji": "\U0001f600", "ls": "\u2028"}'.encode(),
    "escaped-control-characters": b'["\\u0000\\u001f\\u007f", "tab\\there", "\\"q\\" \\\\ \\/"]',
    "raw-del": b'["\x7f"]',
    "escaped-lone-surrogate": b'["\\ud800", "\\ud83d\\ude00"]',
    "nan-and-infinity": b"[NaN, Infinity, -Infinity]",
    "byte-order-mark": b"\xef\xbb\xbf[1]",
    "whitespace-and-order": b'\n{ "z" : [ ] ,\t"a" : { "d" : 1 , "c" : "" } }\n',
    "plain-types": (
        b'{"n": [1, -2, 18446744073709551615], "s": "a\\u0001\\n\\"\\\\", "t": true, "f": false, "z": null}'
    ),
    "scalar": b'"just a string"',
    "duplicate-keys": b'{"a": 1, "a": 2}',
    "not-json": b"not json",
    "truncated": b'{"a": [1, 2',
    "not-utf-8": b'["\xff"]',
    "empty": b"",
}

# The bytes every release so far has written: stored etags and fingerprints hash them.
CANONICAL: dict[str, bytes] = {
    "naive-datetime": b'{"t":"2026-05-01T12:00:00.123456Z"}',
    "naive-datetime-whole-second": b'{"t":"2026-05-01T12:00:00.000000Z"}',
    "aware-utc-datetime": b'{"t":"2026-05-01T12:00:00.000005Z"}',
    "aware-offset-datetime": b'{"t":"2026-05-01T12:30:00.987654Z"}',
    "aware-negative-offset-past-midnight": b'{"t":"2027-01-01T01:30:00.000000Z"}',
    "date-and-time": b'{"d":"2026-05-01","tm":"12:30:01.000007","tz":"08:00:00+00:00"}',
    "integral-floats": b'{"a":100,"b":-3,"c":0,"d":0,"e":9007199254740991,"f":-4503599627370496}',
    "floats-at-and-beyond-2**53": (
        b'{"a":9007199254740992.0,"b":9007199254740994.0,"c":1e+16,"d":-1.152921504606847e+18,"e":1e+300}'
    ),
    "non-integral-floats": (
        b'{"a":0.1,"b":2.5,"c":1e-07,"d":1.5e-07,"e":5e-324,"f":-1.7976931348623157e+308}'
    ),
    "ints": (
        b'{"a":0,"b":-1,"c":9007199254740993,"d":9223372036854775807,"e":-9223372036854775808,"f":18446'
        b'744073709551616,"g":-1208925819614629174706176}'
    ),
    "sets": b'{"e":[],"f":[-1,2,3],"s":["a","b","c","\xc3\xa9"]}',
    "uuids": b'{"m":"1be26c0b-03f2-4d2e-ae87-c02d7f33c123","u":"00000000-0000-0000-0000-000000000005"}',
    "decimals": b'{"a":100,"b":0.5,"c":-7,"d":100000000000000000000}',
    "non-ascii": (
        b'{"bom":"\xef\xbb\xbf\xef\xbf\xbf","emoji":"\xf0\x9f\x98\x80","\xc3\xa9":"node-\xc3\xa9","\xe6'
        b'\x97\xa5\xe6\x9c\xac":"\xe2\x80\xa8\xe2\x80\xa9"}'
    ),
    "control-characters": (
        b'{"c":"\\u0000\\u0001\\b\\t\\n\\f\\r\\u001f\x7f\xc2\x80\xc2\x9f","q":"\\"\\\\/"}'
    ),
    "key-order": (
        b'{"":4,"B":3,"a":2,"aa":5,"b":1,"\x7f":6,"\xc3\xa9":7,"\xee\x80\x80":8,"\xf0\x90\x80\x80":9}'
    ),
    "int-keys": b'{"-3":"minus three","1":"one","2":"two"}',
    "tuples-and-empties": b'{"d":{},"f":false,"l":[],"n":null,"t":[1,[2,3],[]],"y":true}',
    "nested": (
        b'{"a":[1.25,{"k":["p","q"]},1e+16,"\xc3\xa9\\u001f"],"z":{"x":{"w":{"v":[[[]]]}},"y":[{"a":["2'
        b'026-01-01T00:00:00.000000Z",["00000000000000000000000000000001"]],"b":2.5}]}}'
    ),
    "all-together": (
        b'{"aware_negative_offset_past_midnight":{"t":"2027-01-01T01:30:00.000000Z"},"aware_offset_date'
        b'time":{"t":"2026-05-01T12:30:00.987654Z"},"aware_utc_datetime":{"t":"2026-05-01T12:00:00.0000'
        b'05Z"},"control_characters":{"c":"\\u0000\\u0001\\b\\t\\n\\f\\r\\u001f\x7f\xc2\x80\xc2\x9f","q'
        b'":"\\"\\\\/"},"date_and_time":{"d":"2026-05-01","tm":"12:30:01.000007","tz":"08:00:00+00:00"}'
        b',"decimals":{"a":100,"b":0.5,"c":-7,"d":100000000000000000000},"floats_at_and_beyond_2**53":{'
        b'"a":9007199254740992.0,"b":9007199254740994.0,"c":1e+16,"d":-1.152921504606847e+18,"e":1e+300'
        b'},"int_keys":{"-3":"minus three","1":"one","2":"two"},"integral_floats":{"a":100,"b":-3,"c":0'
        b',"d":0,"e":9007199254740991,"f":-4503599627370496},"ints":{"a":0,"b":-1,"c":9007199254740993,'
        b'"d":9223372036854775807,"e":-9223372036854775808,"f":18446744073709551616,"g":-12089258196146'
        b'29174706176},"key_order":{"":4,"B":3,"a":2,"aa":5,"b":1,"\x7f":6,"\xc3\xa9":7,"\xee\x80\x80":'
        b'8,"\xf0\x90\x80\x80":9},"naive_datetime":{"t":"2026-05-01T12:00:00.123456Z"},"naive_datetime_'
        b'whole_second":{"t":"2026-05-01T12:00:00.000000Z"},"nested":{"a":[1.25,{"k":["p","q"]},1e+16,"'
        b'\xc3\xa9\\u001f"],"z":{"x":{"w":{"v":[[[]]]}},"y":[{"a":["2026-01-01T00:00:00.000000Z",["0000'
        b'0000000000000000000000000001"]],"b":2.5}]}},"non_ascii":{"bom":"\xef\xbb\xbf\xef\xbf\xbf","em'
        b'oji":"\xf0\x9f\x98\x80","\xc3\xa9":"node-\xc3\xa9","\xe6\x97\xa5\xe6\x9c\xac":"\xe2\x80\xa8'
        b'\xe2\x80\xa9"},"non_integral_floats":{"a":0.1,"b":2.5,"c":1e-07,"d":1.5e-07,"e":5e-324,"f":-1'
        b'.7976931348623157e+308},"sets":{"e":[],"f":[-1,2,3],"s":["a","b","c","\xc3\xa9"]},"tuples_and'
        b'_empties":{"d":{},"f":false,"l":[],"n":null,"t":[1,[2,3],[]],"y":true},"uuids":{"m":"1be26c0b'
        b'-03f2-4d2e-ae87-c02d7f33c123","u":"00000000-0000-0000-0000-000000000005"}}'
    ),
}
TIMESPEC_SECONDS: dict[str, bytes] = {
    "naive-datetime": b'{"t":"2026-05-01T12:00:00Z"}',
    "naive-datetime-whole-second": b'{"t":"2026-05-01T12:00:00Z"}',
    "aware-utc-datetime": b'{"t":"2026-05-01T12:00:00Z"}',
    "aware-offset-datetime": b'{"t":"2026-05-01T12:30:00Z"}',
    "date-and-time": b'{"d":"2026-05-01","tm":"12:30:01.000007","tz":"08:00:00+00:00"}',
    "nested": (
        b'{"a":[1.25,{"k":["p","q"]},1e+16,"\xc3\xa9\\u001f"],"z":{"x":{"w":{"v":[[[]]]}},"y":[{"a":["2'
        b'026-01-01T00:00:00Z",["00000000000000000000000000000001"]],"b":2.5}]}}'
    ),
    "all-together": (
        b'{"aware_negative_offset_past_midnight":{"t":"2027-01-01T01:30:00Z"},"aware_offset_datetime":{'
        b'"t":"2026-05-01T12:30:00Z"},"aware_utc_datetime":{"t":"2026-05-01T12:00:00Z"},"control_charac'
        b'ters":{"c":"\\u0000\\u0001\\b\\t\\n\\f\\r\\u001f\x7f\xc2\x80\xc2\x9f","q":"\\"\\\\/"},"date_a'
        b'nd_time":{"d":"2026-05-01","tm":"12:30:01.000007","tz":"08:00:00+00:00"},"decimals":{"a":100,'
        b'"b":0.5,"c":-7,"d":100000000000000000000},"floats_at_and_beyond_2**53":{"a":9007199254740992.'
        b'0,"b":9007199254740994.0,"c":1e+16,"d":-1.152921504606847e+18,"e":1e+300},"int_keys":{"-3":"m'
        b'inus three","1":"one","2":"two"},"integral_floats":{"a":100,"b":-3,"c":0,"d":0,"e":9007199254'
        b'740991,"f":-4503599627370496},"ints":{"a":0,"b":-1,"c":9007199254740993,"d":92233720368547758'
        b'07,"e":-9223372036854775808,"f":18446744073709551616,"g":-1208925819614629174706176},"key_ord'
        b'er":{"":4,"B":3,"a":2,"aa":5,"b":1,"\x7f":6,"\xc3\xa9":7,"\xee\x80\x80":8,"\xf0\x90\x80\x80":'
        b'9},"naive_datetime":{"t":"2026-05-01T12:00:00Z"},"naive_datetime_whole_second":{"t":"2026-05-'
        b'01T12:00:00Z"},"nested":{"a":[1.25,{"k":["p","q"]},1e+16,"\xc3\xa9\\u001f"],"z":{"x":{"w":{"v'
        b'":[[[]]]}},"y":[{"a":["2026-01-01T00:00:00Z",["00000000000000000000000000000001"]],"b":2.5}]}'
        b'},"non_ascii":{"bom":"\xef\xbb\xbf\xef\xbf\xbf","emoji":"\xf0\x9f\x98\x80","\xc3\xa9":"node-'
        b'\xc3\xa9","\xe6\x97\xa5\xe6\x9c\xac":"\xe2\x80\xa8\xe2\x80\xa9"},"non_integral_floats":{"a":0'
        b'.1,"b":2.5,"c":1e-07,"d":1.5e-07,"e":5e-324,"f":-1.7976931348623157e+308},"sets":{"e":[],"f":'
        b'[-1,2,3],"s":["a","b","c","\xc3\xa9"]},"tuples_and_empties":{"d":{},"f":false,"l":[],"n":null'
        b',"t":[1,[2,3],[]],"y":true},"uuids":{"m":"1be26c0b-03f2-4d2e-ae87-c02d7f33c123","u":"00000000'
        b'-0000-0000-0000-000000000005"}}'
    ),
}
CANONICAL_ASCII: dict[str, bytes | None] = {
    "object": b'{"a":"t\\u00e9xt","b":[1,{"x":true,"y":null}]}',
    "floats": b"[1.5,100.0,1e+16,100.0,-0.0,0.1,2.5e-07,1e+300,5e-324]",
    "big-ints": (b'{"big":123456789012345678901234,"max":9223372036854775807,"neg":-18446744073709551616}'),
    "utf-8-text": b'{"emoji":"\\ud83d\\ude00","ls":"\\u2028","\\u00e9":"\\u65e5\\u672c"}',
    "escaped-control-characters": b'["\\u0000\\u001f\\u007f","tab\\there","\\"q\\" \\\\ /"]',
    "raw-del": b'["\\u007f"]',
    "escaped-lone-surrogate": b'["\\ud800","\\ud83d\\ude00"]',
    "nan-and-infinity": b"[NaN,Infinity,-Infinity]",
    "byte-order-mark": b"[1]",
    "whitespace-and-order": b'{"a":{"c":"","d":1},"z":[]}',
    "plain-types": (
        b'{"f":false,"n":[1,-2,18446744073709551615],"s":"a\\u0001\\n\\"\\\\","t":true,"z":null}'
    ),
    "scalar": b'"just a string"',
    "duplicate-keys": b'{"a":2}',
    "not-json": None,
    "truncated": None,
    "not-utf-8": None,
    "empty": None,
}


@pytest.mark.parametrize("name", DOCUMENTS)
def test_canonical_json_gives_the_pinned_bytes(name: str) -> None:
    assert canonical_json(DOCUMENTS[name]) == CANONICAL[name]


@pytest.mark.parametrize("name", TIMESPEC_SECONDS)
def test_canonical_json_at_second_precision_gives_the_pinned_bytes(name: str) -> None:
    assert canonical_json(DOCUMENTS[name], timespec="seconds") == TIMESPEC_SECONDS[name]


def test_millisecond_precision_truncates() -> None:
    doc = {"t": dt.datetime(2026, 5, 1, 14, 30, 0, 987654, tzinfo=PLUS_TWO)}
    assert canonical_json(doc, timespec="milliseconds") == b'{"t":"2026-05-01T12:30:00.987Z"}'


@pytest.mark.parametrize("name", BODIES)
def test_canonical_ascii_json_gives_the_pinned_bytes(name: str) -> None:
    assert canonical_ascii_json(BODIES[name]) == CANONICAL_ASCII[name]
