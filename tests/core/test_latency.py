"""One percentile (numpy's linear rule) and one latency summary."""

from __future__ import annotations

import numpy as np
import pytest
from specrag.core.latency import Latency, percentile


@pytest.mark.parametrize("values", [[10.0, 20.0, 30.0, 40.0], [5.0], [3.0, 1.0, 2.0, 100.0, 7.0]])
def test_percentile_matches_numpy(values):
    for q in (50, 95):
        assert percentile(values, q) == pytest.approx(float(np.percentile(values, q)))


def test_percentile_by_hand():
    assert percentile([10, 20, 30, 40], 50) == 25.0
    assert percentile([10, 20, 30, 40], 95) == pytest.approx(38.5)
    assert percentile([], 50) == 0.0


def test_latency_percentiles_exact():
    lat = Latency.of([4.0, 1.0, 3.0, 2.0])
    assert (lat.p50, lat.p95, lat.p99, lat.mean, lat.max, lat.n) == (2.5, 3.85, 3.97, 2.5, 4.0, 4)
    assert Latency.of([]).n == 0
