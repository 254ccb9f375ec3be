"""Exact top-k from int8 estimates (``specrag.index.bounded``): the same rows and cosines as a
full float32 product, whatever the ties, masks and depths."""

import logging

import numpy as np
import pytest
from specrag.index.bounded import (
    ROW_CODE_LIMIT,
    BoundedRows,
    Estimate,
    Int8Product,
    kth_largest,
    quantize_queries,
)


def unit_rows(rng, n: int, dim: int) -> np.ndarray:
    rows = rng.standard_normal((n, dim)).astype(np.float32)
    return rows / np.linalg.norm(rows, axis=1, keepdims=True)


@pytest.fixture(scope="module")
def block():
    """3,000 unit rows, 600 of them copies of others (the fleet's identical operations share a
    vector), in steps as the index prepares them."""
    rng = np.random.default_rng(3)
    rows = unit_rows(rng, 3000, 48)
    rows[2400:] = rows[rng.choice(2400, 600)]
    steps = [(first, min(first + 1024, 3000), rows[first:first + 1024]) for first in range(0, 3000, 1024)]
    return BoundedRows.build(steps, 3000, 48), rows


def test_the_int8_product_is_exact_integer_arithmetic():
    """Pinned against numpy's int64 product: the same integers on any CPU (on AVX2 without VNNI,
    8-bit weights saturate a pair of products in int16; the product's 7-bit weights cannot)."""
    rng = np.random.default_rng(0)
    codes = rng.integers(-ROW_CODE_LIMIT, ROW_CODE_LIMIT + 1, size=(40, 900), dtype=np.int8)
    product = Int8Product.create(codes)
    queries = rng.integers(0, 256, size=(3, 40), dtype=np.uint8)
    expected = (queries.astype(np.int64) - 128) @ codes.astype(np.int64)
    assert np.array_equal(product(queries), expected)
    assert np.array_equal(product(queries[:1]), expected[:1])


@pytest.mark.parametrize("query_code", [0, 255])
@pytest.mark.parametrize("weight", [-ROW_CODE_LIMIT, ROW_CODE_LIMIT])
def test_the_int8_product_is_exact_at_the_extremes(query_code, weight):
    """Every pair of adjacent products at its largest magnitude, over the embedding's width."""
    codes = np.full((384, 16), weight, dtype=np.int8)
    codes[:, 1::2] = -weight  # alternating signs too
    product = Int8Product.create(codes)
    queries = np.full((2, 384), query_code, dtype=np.uint8)
    queries[1, ::3] = 255 - query_code
    expected = (queries.astype(np.int64) - 128) @ codes.astype(np.int64)
    assert np.array_equal(product(queries), expected)


def test_the_int8_product_refuses_weights_that_could_saturate():
    with pytest.raises(ValueError, match="within"):
        Int8Product.create(np.full((4, 4), ROW_CODE_LIMIT + 1, dtype=np.int8))


def test_a_block_keeps_its_codes_within_the_exact_range(block):
    bounded, _ = block
    assert np.abs(bounded.codes.astype(np.int16)).max() == ROW_CODE_LIMIT


def test_every_estimate_is_within_its_bound(block):
    bounded, rows = block
    rng = np.random.default_rng(1)
    queries = np.vstack([unit_rows(rng, 6, 48), rows[:2]])  # random questions, and rows themselves
    codes, scales = quantize_queries(queries)
    assert np.abs((codes.astype(np.float64) - 128) * scales[:, None] - queries).max() <= scales.max() / 2 + 1e-9
    for estimate, query in zip(bounded.estimates(queries), queries):
        exact = rows @ query
        assert (np.abs(exact - estimate.approx) <= estimate.bound).all()
        assert estimate.bound.max() < 0.05  # tight enough to prune: it is what makes this fast


@pytest.mark.parametrize("k", [1, 7, 150, 2999, 3000, 5000])
def test_best_rows_are_the_exact_top_k_with_ties(block, k):
    bounded, rows = block
    rng = np.random.default_rng(k)
    masks = [None, rng.random(3000) < 0.3, np.zeros(3000, dtype=bool)]
    for query in np.vstack([unit_rows(rng, 3, 48), rows[2400:2401]]):  # the last: a duplicated row
        (estimate,) = bounded.estimates(query[None])
        for keep in masks:
            allowed = np.arange(3000) if keep is None else np.flatnonzero(keep)
            offsets, cosines = estimate.best(k, keep)
            exact = np.einsum("ij,j->i", rows[allowed], query)
            if not len(allowed):
                assert len(offsets) == 0
                continue
            kth = np.sort(exact)[::-1][min(k, len(allowed)) - 1]
            assert set(offsets.tolist()) == set(allowed[exact >= kth].tolist())  # every tie at the k-th
            assert np.array_equal(cosines, estimate.exact(offsets))
            assert np.allclose(cosines, rows[offsets] @ query, atol=1e-6)


def test_equal_rows_score_equal_wherever_they_lie(block):
    """Ties between identical vectors must stay ties (broken later by chunk id), so a row's exact
    cosine does not depend on which other rows are scored with it."""
    bounded, rows = block
    (estimate,) = bounded.estimates(rows[2400:2401])
    copies = np.flatnonzero((rows == rows[2400]).all(axis=1))
    assert len(copies) >= 2
    alone = [estimate.exact(np.array([c]))[0] for c in copies]
    together = estimate.exact(np.concatenate([np.arange(0, 50), copies]))[50:]
    assert len(set(alone) | set(together.tolist())) == 1
    part = estimate.span(100, 3000)
    assert np.array_equal(part.exact(copies - 100), together)


@pytest.mark.parametrize("n,k", [(20000, 150), (20000, 1), (20000, 400), (500, 30), (9600, 150)])
def test_kth_largest_matches_a_full_partition(n, k):
    rng = np.random.default_rng(n + k)
    for values in (rng.standard_normal(n).astype(np.float32),
                   rng.choice(np.linspace(-1, 1, 5), size=n).astype(np.float32),  # heavy ties
                   np.sort(rng.standard_normal(n)).astype(np.float32)):  # sorted: a strided sample sees a trend
        assert kth_largest(values, k) == np.sort(values)[::-1][k - 1]


def test_without_onnx_runtime_the_products_stay_exact(monkeypatch, caplog):
    import onnxruntime

    def refuse(*args, **kwargs):
        raise RuntimeError("no CPU provider here")

    monkeypatch.setattr(onnxruntime, "InferenceSession", refuse)
    rows = unit_rows(np.random.default_rng(5), 200, 16)
    with caplog.at_level(logging.WARNING):
        bounded = BoundedRows.build([(0, 200, rows)], 200, 16)
    assert bounded.product is None
    assert "int8 estimates unavailable (no CPU provider here)" in caplog.text
    products = bounded.estimates(rows[:2])
    assert not isinstance(products, Estimate) and np.allclose(products, rows[:2] @ rows.T, atol=1e-6)


def test_rows_whose_estimates_misorder_them_still_rank_exactly():
    """1,000 rows whose cosines with the question are 1e-4 apart, far closer than int8 rounding
    (~0.005): the estimates put them in another order, and only the bound keeps every row that
    truly ranks among the candidates."""
    rng = np.random.default_rng(11)
    dim = 64
    query = unit_rows(rng, 1, dim)[0]
    noise = rng.standard_normal((1000, dim)).astype(np.float32)
    noise -= np.outer(noise @ query, query)  # orthogonal to the question
    noise /= np.linalg.norm(noise, axis=1, keepdims=True)
    cosines = 0.5 + 1e-4 * rng.permutation(1000)
    rows = (cosines[:, None] * query + np.sqrt(1 - cosines[:, None] ** 2) * noise).astype(np.float32)
    bounded = BoundedRows.build([(0, 1000, rows)], 1000, dim)
    (estimate,) = bounded.estimates(query[None])
    exact = np.einsum("ij,j->i", rows, query)
    assert (np.argsort(-estimate.approx)[:50] != np.argsort(-exact)[:50]).any()  # the estimates misorder
    for k in (1, 10, 50, 200):
        offsets, _ = estimate.best(k, None)
        assert set(offsets.tolist()) == set(np.argsort(-exact)[:k].tolist())
