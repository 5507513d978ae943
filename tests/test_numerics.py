"""Tensor facts computed with NumPy, against NumPy's own reductions. No TensorFlow."""
import math
import types

import numpy as np
import pytest

from tapeviz.worker import numerics


@pytest.mark.parametrize("shape", [(7,), (3, 5), (2, 3, 4, 5), (64, 64)])
def test_stats_match_numpy_on_finite_values(shape):
    a = np.random.default_rng(1).normal(3.0, 2.0, shape).astype(np.float32)
    s = numerics.stats(a)
    assert (s.min, s.max) == (float(a.min()), float(a.max()))
    assert s.mean == pytest.approx(float(a.astype(np.float64).mean()), rel=1e-9)
    assert s.std == pytest.approx(float(a.astype(np.float64).std()), rel=1e-6)
    assert (s.nan, s.inf) == (0, 0)


def test_stats_count_nan_and_inf_and_describe_the_finite_rest():
    a = np.array([1.0, np.nan, 3.0, np.inf, -np.inf, np.nan], dtype=np.float32)
    s = numerics.stats(a)
    assert (s.nan, s.inf) == (2, 2)
    assert (s.min, s.max, s.mean) == (1.0, 3.0, 2.0)
    only_bad = numerics.stats(np.array([np.nan, np.inf]))
    assert only_bad.min is None and (only_bad.nan, only_bad.inf) == (1, 1)


def test_stats_of_scalars_ints_complex_empty_and_strings():
    assert numerics.stats(np.float32(2.5).reshape(())).std == 0.0
    assert numerics.stats(np.array(np.nan)).nan == 1
    ints = numerics.stats(np.array([1, 2, 3], dtype=np.int32))
    assert (ints.min, ints.max, ints.mean) == (1.0, 3.0, 2.0)
    assert numerics.stats(np.array([3 + 4j, 0j])).max == 5.0
    assert numerics.stats(np.zeros((0, 3), np.float32)).mean is None
    assert numerics.stats(np.array([b"a", b"b"])) is None


def test_plain_values_are_strict_json():
    assert numerics.plain_value(np.array([[1.0, 2.0]], np.float32), finite=True) == [[1.0, 2.0]]
    assert numerics.plain_value(np.array([1.0, np.nan, -np.inf])) == [1.0, "nan", "-inf"]
    assert numerics.plain_value(np.array(np.inf)) == "inf"
    assert numerics.plain_value(np.array([b"fizz", b"buzz"])) == ["fizz", "buzz"]
    assert numerics.plain_value(np.array([True, False])) == [True, False]


def test_norm_of_dense_and_sliced_gradients():
    assert numerics.norm(np.array([3.0, 4.0], np.float32)) == 5.0
    slices = types.SimpleNamespace(values=np.array([[1.0, 2.0], [2.0, 4.0]]))
    assert numerics.norm(slices) == pytest.approx(5.0)
    assert numerics.norm(None) is None
    assert numerics.norm(np.zeros((0,))) == 0.0


@pytest.mark.parametrize("shape", [(32, 26, 26, 16), (3, 12_345)])
def test_big_float32_tensors_are_summed_in_blocks_within_1e7(shape):
    # An activation-sized tensor takes the float32-block path (numerics._sums); a size that
    # is no multiple of the block has a float64 remainder.
    a = np.random.default_rng(6).normal(0.5, 2.0, shape).astype(np.float32)
    s = numerics.stats(a)
    ref = a.astype(np.float64)
    assert (s.min, s.max) == (float(a.min()), float(a.max()))
    assert s.mean == pytest.approx(ref.mean(), rel=1e-7)
    assert s.std == pytest.approx(ref.std(), rel=1e-7)
    assert numerics.norm(a) == pytest.approx(float(np.sqrt((ref * ref).sum())), rel=1e-7)
    filled = numerics.stats(np.full(shape, 0.1, np.float32))
    assert (filled.mean, filled.std) == (float(np.float32(0.1)), 0.0)


@pytest.mark.parametrize("n", [100, 10_000, 300_000])
def test_stats_accumulate_in_float64_for_values_far_from_zero(n):
    a = (1000.0 + 0.01 * np.random.default_rng(2).normal(size=n)).astype(np.float32)
    s = numerics.stats(a)
    ref = a.astype(np.float64)
    assert s.mean == pytest.approx(ref.mean(), rel=1e-12)
    assert s.std == pytest.approx(ref.std(), rel=1e-6)


def test_stats_of_huge_values_are_finite_or_strict_json_strings():
    import json
    s = numerics.stats(np.array([1e20, 3e20, -2e20] * 2000, np.float32))
    ref = np.array([1e20, 3e20, -2e20] * 2000, np.float32).astype(np.float64)
    assert s.std == pytest.approx(ref.std(), rel=1e-9)
    top = numerics.stats(np.array([1.7e308, 1.7e308, -1.0]))
    assert top.max == 1.7e308
    json.dumps(top.__dict__, allow_nan=False)          # "inf" at worst, never a float inf


def test_non_numeric_values_get_a_short_preview_and_no_stats():
    assert numerics.stats(b"scalar string") is None
    assert numerics.preview(b"hello") == "'hello'"
    long = numerics.preview(np.array([b"x" * 500] * 20, dtype=object))
    assert len(long) <= numerics.PREVIEW_CHARS and long.startswith("['xxx")
    assert numerics.string_value(np.array([b"a", "b\u00e9".encode()], dtype=object)) == ["a", "b\u00e9"]
    assert len(numerics.string_value(b"y" * 1000)) == numerics.PREVIEW_CHARS + 1


@pytest.mark.parametrize("values", [
    np.random.default_rng(4).normal(3.0, 2.0, (40, 50)).astype(np.float32),   # NumPy's path
    np.array([[3.0, -4.0]], np.float32),                                      # plain Python's
    np.full(7, 1000.0) + 0.01 * np.random.default_rng(5).normal(size=7),      # spread << mean
    np.zeros((3, 3), np.float32),
    np.zeros((0, 4), np.float32),
    np.array([1.0, np.nan, 2.0], np.float32),
    np.array([1.0, np.inf, 2.0], np.float32),
])
def test_a_norm_from_stats_equals_the_norm_of_the_values(values):
    want = numerics.norm(values)
    got = numerics.norm_from_stats(numerics.stats(values), values.shape)
    if math.isnan(want):
        assert math.isnan(got)
    else:
        assert got == pytest.approx(want, rel=1e-12)
    assert numerics.norm_from_stats(None, values.shape) is None
