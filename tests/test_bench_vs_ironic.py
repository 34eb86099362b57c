"""The benchmark's figures: nearest-rank percentiles and the req/s of a sequential client."""

from __future__ import annotations

import math

from bench._http import percentile, summarize


def test_percentiles_are_nearest_rank() -> None:
    values = [float(v) for v in range(1, 101)]  # 1..100
    assert percentile(values, 50) == 50.0
    assert percentile(values, 99) == 99.0
    assert percentile(values, 100) == 100.0
    assert percentile([7.0], 99) == 7.0
    assert percentile([1.0, 2.0], 50) == 1.0  # rank ceil(0.5 * 2) = 1
    assert math.isnan(percentile([], 50))


def test_sequential_rate_is_requests_over_time_spent_in_them() -> None:
    # 4 requests of 10 ms and one of 60 ms: 5 requests in 100 ms of requests -> 50 req/s,
    # whatever untimed set-up happened between them; p99 is the slow one.
    got = summarize([0.01, 0.01, 0.06, 0.01, 0.01])
    assert got["requests"] == 5
    assert math.isclose(got["rps"], 50.0)
    assert math.isclose(got["p50_ms"], 10.0)
    assert math.isclose(got["p99_ms"], 60.0)
    # a concurrent run: the requests over its wall time
    assert math.isclose(summarize([0.01] * 8, 0.02)["rps"], 400.0)
