"""Exact top-k cosines over a whole float32 block, from int8 estimates with a bound per row.

Every query's stage 1 scores the fleet's ~19k endpoint vectors. As one float32 product, which
streams 30 MB, that was the largest single item of a query's CPU outside its embedding: ~1.25 ms
inside a query, whose other work leaves the block out of the cache (0.85-0.97 ms hot). ONNX
Runtime's ``MatMulInteger`` (already loaded for the embedding model) scores the rows' int8 codes,
prepacked once, in ~0.5 ms cold and ~0.12 ms hot: a quarter of the bytes. Each estimate is off
by at most a bound known per row (the query's and the row's rounding errors, by Cauchy-Schwarz),
so only the rows whose bound reaches the k-th best estimate can be in the exact top k; those
(~300 of 19k for k = 150) are scored exactly, in float32 from the kept rows. The ranking is the
exact one; only rows that cannot rank are never scored exactly.
"""

from __future__ import annotations

import logging
from typing import NamedTuple

import numpy as np

log = logging.getLogger(__name__)

# |computed exact - estimate| beyond the bound's algebra: float32 rounding of both sides
# (a 384-term float32 dot product of unit vectors is within ~2e-5 of the real number)
ROUNDING = 1e-4
QUERY_ZERO = 128  # uint8 zero point of a query's codes (a query is quantized symmetric, as uint8)
# The rows' codes stay within +-63 (7 bits). On x86-64 without AVX-512 VNNI, ONNX Runtime's
# uint8 x int8 kernel (vpmaddubsw) adds each pair of adjacent products in saturating int16:
# 2 x 255 x 127 = 64,770 overflows it, 2 x 255 x 63 = 32,130 cannot. With 7-bit rows the product
# is exact integer arithmetic on every instruction set (AVX2, AVX-512, VNNI, arm64), so the
# ranking does not depend on the CPU; the bound below absorbs the coarser rounding.
ROW_CODE_LIMIT = 63


class BoundedRows(NamedTuple):
    """A block as float32 rows (exact scores) and int8 codes (estimates, through ONNX Runtime).

    The rows are the block's distinct vectors: ``row_of`` maps each of the block's rows to one,
    so a text repeated across the fleet is stored, quantized and scored once."""

    rows: np.ndarray  # float32, n distinct x dim
    codes: np.ndarray  # int8, dim x n (the product's weights; ONNX Runtime reads it, keep it alive)
    scales: np.ndarray  # float32, one per row: a row is about ``codes * scale``
    errors: np.ndarray  # float32, one per row: the norm of ``row - codes * scale``
    largest_norm: float
    product: "Int8Product | None"  # None: ONNX Runtime refused, every product is exact
    row_of: np.ndarray  # int32 per block row: its distinct row

    @classmethod
    def build(cls, steps, n: int, dim: int, row_of: np.ndarray | None = None) -> "BoundedRows":
        """From ``(offset, end, float rows)`` steps covering distinct rows [0, n); ``row_of``: each
        block row's distinct row (None: every row is distinct)."""
        rows = np.empty((n, dim), dtype=np.float32)
        codes = np.empty((dim, n), dtype=np.int8)
        scales, errors = np.empty(n, dtype=np.float32), np.empty(n, dtype=np.float32)
        for first, last, step in steps:
            rows[first:last] = step
            step_codes, scales[first:last] = quantize(rows[first:last], ROW_CODE_LIMIT)
            codes[:, first:last] = step_codes.T
            residual = rows[first:last].astype(np.float64) - step_codes * scales[first:last, None].astype(np.float64)
            errors[first:last] = np.linalg.norm(residual, axis=1)
        largest_norm = float(np.linalg.norm(rows, axis=1).max()) if n else 0.0
        row_of = np.arange(n, dtype=np.int32) if row_of is None else np.asarray(row_of, dtype=np.int32)
        return cls(rows, codes, scales, errors, largest_norm, Int8Product.create(codes) if n else None, row_of)

    @property
    def n_rows(self) -> int:
        return len(self.row_of)

    def times(self, queries: np.ndarray, start: int, end: int) -> np.ndarray:
        """Exact cosines (queries x rows) of block rows [start, end)."""
        return queries @ self.rows[self.row_of[start:end]].T

    def estimates(self, queries: np.ndarray) -> list["Estimate"] | np.ndarray:
        """Per query, its cosines with every row as estimates within a bound (one product for all
        the queries); exact cosines when ONNX Runtime is not available."""
        if self.product is None or not len(self.rows):
            return self.times(queries, 0, self.n_rows)
        codes, query_scales = quantize_queries(queries)
        products = self.product(codes)
        out = []
        for query, code, query_scale, product in zip(queries, codes, query_scales, products):
            approx = product.astype(np.float32)
            approx *= self.scales
            approx *= np.float32(query_scale)
            rounded = (code.astype(np.float64) - QUERY_ZERO) * query_scale
            bound = self.errors * np.float32(np.linalg.norm(rounded))
            bound += np.float32(np.linalg.norm(query - rounded) * self.largest_norm + ROUNDING)
            approx, bound = approx[self.row_of], bound[self.row_of]  # per block row
            approx.flags.writeable = bound.flags.writeable = False  # kept for the query's later searches
            out.append(Estimate(approx, bound, query, self.rows, self.row_of))
        return out


class Estimate(NamedTuple):
    """One query's cosines with rows, each estimated within its bound; exact on demand."""

    approx: np.ndarray  # float32 per row
    bound: np.ndarray  # float32 per row: |exact - approx| <= bound
    query: np.ndarray
    rows: np.ndarray  # float32 distinct rows
    row_of: np.ndarray  # the estimate's row i is rows[row_of[i]]

    def span(self, start: int, end: int) -> "Estimate":
        return Estimate(self.approx[start:end], self.bound[start:end], self.query, self.rows, self.row_of[start:end])

    def exact(self, offsets: np.ndarray) -> np.ndarray:
        """Exact cosines of the rows at ``offsets``, each computed the same way wherever it lies
        (equal rows score equal: ties are then broken by chunk id, as in a full product)."""
        return np.einsum("ij,j->i", self.rows[self.row_of[offsets]], self.query)

    def best(self, k: int, keep: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
        """Offsets and exact cosines of every row scoring at least the ``k``-th best exact cosine
        (ties kept), among ``keep`` if given."""
        if keep is None:
            offsets, approx, bound = None, self.approx, self.bound
        else:
            offsets = np.flatnonzero(keep)
            approx, bound = self.approx[offsets], self.bound[offsets]
        if len(approx) > k:
            kth = kth_largest(approx, k)
            # the rows estimated at or above the k-th estimate (k of them at least) each score at
            # least estimate - bound, so the k-th best exact cosine is at least this floor; a row
            # below it even at its estimate + bound cannot rank
            floor = kth - bound[approx >= kth].max()
            reach = np.flatnonzero(approx + bound >= floor)
            offsets = reach if offsets is None else offsets[reach]
        elif offsets is None:
            offsets = np.arange(len(approx))
        cosines = self.exact(offsets)
        ranked = best_rows(cosines, k, None)
        return offsets[ranked], cosines[ranked]


def best_rows(sims: np.ndarray, k: int, keep: np.ndarray | None) -> np.ndarray:
    """Offsets of a span's candidates for the top ``k``: every row scoring at least its ``k``-th
    best (ties kept, so the final ranking is the one over all rows), among ``keep`` if given.
    An unfiltered search otherwise builds and sorts arrays over the whole fleet per query."""
    offsets = np.flatnonzero(keep) if keep is not None else None
    scores = sims[offsets] if offsets is not None else sims
    picked = np.flatnonzero(scores >= kth_largest(scores, k)) if len(scores) > k else np.arange(len(scores))
    return offsets[picked] if offsets is not None else picked


def kth_largest(values: np.ndarray, k: int) -> float:
    """The ``k``-th largest of ``values`` (1 <= k < len). A whole-array partition of the fleet's
    19k estimates took ~100 us; a strided sample's order statistic first picks a cut that about
    ``4 k`` values pass, and only those are partitioned (the whole array when fewer than k pass)."""
    step = len(values) // (16 * k) if len(values) >= 64 * k else 0
    if step >= 2:
        sample = values[::step]
        rank = max(1, 4 * k // step)
        cut = np.partition(sample, len(sample) - rank)[len(sample) - rank]
        passed = values[values >= cut]
        if len(passed) >= k:
            values = passed
    return float(np.partition(values, len(values) - k)[len(values) - k])


def quantize_queries(queries: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """uint8 codes (zero point ``QUERY_ZERO``) and one scale per query: q ~ (code - 128) * scale."""
    largest = np.abs(queries).max(axis=1)
    scales = np.where(largest > 0, largest / 127.0, 1.0)
    codes = np.rint(queries / scales[:, None]) + QUERY_ZERO
    return codes.astype(np.uint8), scales


class Int8Product:
    """``codes_A (m x dim, uint8, zero point 128) @ weights (dim x n, int8 within +-63)`` in int32
    through ONNX Runtime's ``MatMulInteger``: the weights are a session initializer, prepacked
    once. Weights beyond ``ROW_CODE_LIMIT`` are refused: on some CPUs their product saturates."""

    def __init__(self, session, weights):
        self._session = session
        self._weights = weights  # the OrtValue over the codes: must outlive the session

    @classmethod
    def create(cls, codes: np.ndarray) -> "Int8Product | None":
        if codes.size and int(np.abs(codes.astype(np.int16)).max()) > ROW_CODE_LIMIT:
            raise ValueError(f"int8 product weights must lie within +-{ROW_CODE_LIMIT}: wider ones "
                             "saturate on CPUs without AVX-512 VNNI")
        try:
            import onnxruntime as ort

            options = ort.SessionOptions()
            options.intra_op_num_threads = options.inter_op_num_threads = 1  # as one_blas_thread
            options.log_severity_level = 3
            weights = ort.OrtValue.ortvalue_from_numpy(codes)
            options.add_initializer("B", weights)
            session = ort.InferenceSession(_matmul_integer_model(), options, providers=["CPUExecutionProvider"])
            return cls(session, weights)
        except Exception as exc:  # noqa: BLE001 - any refusal leaves the exact product in place
            log.warning("int8 estimates unavailable (%s); whole-block products stay exact float32",
                        str(exc).splitlines()[0] if str(exc) else type(exc).__name__)
            return None

    def __call__(self, codes: np.ndarray) -> np.ndarray:
        return self._session.run(None, {"A": codes})[0]


def _matmul_integer_model() -> bytes:
    """The ONNX model ``Y = MatMulInteger(A, B, a_zero_point=128)``, B given at session creation,
    serialized by hand (protobuf wire format) rather than through the ``onnx`` package, which
    nothing else here needs."""

    def varint(n: int) -> bytes:
        out = bytearray()
        while True:
            out.append((n & 0x7F) | (0x80 if n > 0x7F else 0))
            n >>= 7
            if not n:
                return bytes(out)

    def field(number: int, payload: bytes | str | int) -> bytes:
        if isinstance(payload, int):
            return varint(number << 3) + varint(payload)
        data = payload.encode() if isinstance(payload, str) else payload
        return varint(number << 3 | 2) + varint(len(data)) + data

    uint8, int8, int32 = 2, 3, 6  # TensorProto.DataType

    def value_info(name: str, elem_type: int) -> bytes:  # ValueInfoProto: name, type.tensor_type.elem_type
        return field(1, name) + field(2, field(1, field(1, elem_type)))

    node = field(1, "A") + field(1, "B") + field(1, "azp") + field(2, "Y") + field(4, "MatMulInteger")
    zero_point = field(2, uint8) + field(8, "azp") + field(9, bytes([QUERY_ZERO]))  # TensorProto, scalar
    placeholder = field(1, 1) + field(1, 1) + field(2, int8) + field(8, "B") + field(9, b"\0")  # replaced by add_initializer
    graph = (field(1, node) + field(2, "int8_product") + field(5, zero_point) + field(5, placeholder)
             + field(11, value_info("A", uint8)) + field(12, value_info("Y", int32)))
    return field(1, 7) + field(7, graph) + field(8, field(2, 10))  # ir_version 7, opset 10


def quantize(rows: np.ndarray, limit: int = 127) -> tuple[np.ndarray, np.ndarray]:
    """int8 codes and per-row scales of float rows (symmetric: the largest magnitude maps to
    ``limit``)."""
    rows = np.asarray(rows, dtype=np.float32)
    scales = np.abs(rows).max(axis=1) / float(limit) if rows.size else np.zeros(len(rows), np.float32)
    safe = np.where(scales > 0, scales, 1.0)
    return np.rint(rows / safe[:, None]).astype(np.int8), scales.astype(np.float32)
