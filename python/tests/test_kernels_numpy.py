"""Every built-in kernel against the numpy expression it stands for, over
random dtypes, shapes and layouts (hypothesis): the same result, or a
TypeError/ValueError at push where the kernels refuse (python/src/kernels.rs
states the rules)."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import forksafe

DTYPES = [np.float32, np.float64, np.int32, np.int64, np.bool_]
KERNEL_DTYPES = {np.dtype(d) for d in DTYPES}
LAYOUTS = ["C", "F", "strided"]
SETTINGS = settings(max_examples=150, deadline=None,
                    suppress_health_check=[HealthCheck.function_scoped_fixture])

shapes = hnp.array_shapes(min_dims=0, max_dims=3, min_side=0, max_side=5)


@pytest.fixture(scope="module")
def keng():
    e = forksafe.Engine(compute_workers=2, host_workers=1)
    yield e
    e.shutdown()


def values(dtype, shape):
    dt = np.dtype(dtype)
    if dt.kind == "f":
        elems = st.floats(-1e4, 1e4, width=dt.itemsize * 8, allow_nan=False)
    elif dt.kind == "b":
        elems = st.booleans()
    else:
        info = np.iinfo(dt)
        elems = st.integers(int(info.min), int(info.max))
    return hnp.arrays(dt, shape, elements=elems)


def laid_out(arr, how):
    """`arr`'s values in a C, Fortran or strided (non-contiguous) array."""
    if how == "C":
        return np.ascontiguousarray(arr)
    if how == "F":
        return np.asfortranarray(arr)
    if arr.ndim == 0:
        return np.ascontiguousarray(arr)
    big = np.zeros(arr.shape[:-1] + (arr.shape[-1] * 2,), dtype=arr.dtype)
    view = big[..., ::2]
    view[...] = arr
    return view


def order(a):
    c, f = a.flags.c_contiguous, a.flags.f_contiguous
    return "either" if c and f else "C" if c else "F" if f else None


def kernel_takes(a):
    return (order(a) is not None and a.dtype in KERNEL_DTYPES
            and a.dtype.isnative and a.flags.aligned)


def elementwise_ok(*arrays):
    if not all(kernel_takes(a) for a in arrays):
        return False
    if len({a.dtype for a in arrays}) != 1 or len({a.shape for a in arrays}) != 1:
        return False
    orders = {order(a) for a in arrays} - {"either"}
    return len(orders) <= 1


operand = st.tuples(st.sampled_from(DTYPES), shapes, st.sampled_from(LAYOUTS))


@st.composite
def two_operands(draw, same_shape_often=True):
    dtype = draw(st.sampled_from(DTYPES))
    shape = draw(shapes)
    other_dtype = dtype if draw(st.booleans()) or draw(st.booleans()) else draw(st.sampled_from(DTYPES))
    other_shape = shape if draw(st.booleans()) or draw(st.booleans()) else draw(shapes)
    a = laid_out(draw(values(dtype, shape)), draw(st.sampled_from(LAYOUTS)))
    b = laid_out(draw(values(other_dtype, other_shape)), draw(st.sampled_from(LAYOUTS)))
    out = laid_out(np.zeros(shape, dtype), draw(st.sampled_from(LAYOUTS)))
    return a, b, out


@SETTINGS
@given(two_operands(), st.sampled_from(["add", "mul"]))
def test_add_and_mul_agree_with_numpy(keng, ops, kind):
    a, b, out = ops
    da, db, do = keng.data(a), keng.data(b), keng.data(out)
    kernel = keng.add if kind == "add" else keng.mul
    if not elementwise_ok(a, b, out):
        with pytest.raises((TypeError, ValueError)):
            kernel(da, db, do)
        return
    kernel(da, db, do).result(10)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        want = np.add(a, b) if kind == "add" else np.multiply(a, b)
    np.testing.assert_array_equal(keng.get(do), want)


@SETTINGS
@given(two_operands())
def test_copy_agrees_with_numpy(keng, ops):
    src, _, out = ops
    dsrc, do = keng.data(src), keng.data(out)
    if not elementwise_ok(src, out):
        with pytest.raises((TypeError, ValueError)):
            keng.copy(dsrc, do)
        return
    keng.copy(dsrc, do).result(10)
    np.testing.assert_array_equal(keng.get(do), src)


scalars = st.one_of(st.booleans(), st.integers(-2**40, 2**40), st.floats(-1e3, 1e3))


def scalar_fits(dtype, s):
    kind = np.dtype(dtype).kind
    if kind == "b":
        return isinstance(s, bool)
    if isinstance(s, bool):
        return False
    if kind == "f":
        return True
    info = np.iinfo(dtype)
    return isinstance(s, int) and info.min <= s <= info.max


@SETTINGS
@given(operand, st.sampled_from(LAYOUTS), scalars)
def test_scale_agrees_with_numpy(keng, op, out_layout, factor):
    dtype, shape, layout = op
    a = laid_out(np.arange(int(np.prod(shape)), dtype=np.int64).reshape(shape).astype(dtype), layout)
    out = laid_out(np.zeros(shape, dtype), out_layout)
    da, do = keng.data(a), keng.data(out)
    if not (elementwise_ok(a, out) and scalar_fits(dtype, factor)):
        with pytest.raises((TypeError, ValueError)):
            keng.scale(da, factor, do)
        return
    keng.scale(da, factor, do).result(10)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        want = a * np.asarray(factor, dtype=dtype)
    np.testing.assert_array_equal(keng.get(do), want)


@SETTINGS
@given(operand, scalars)
def test_fill_agrees_with_numpy(keng, op, value):
    dtype, shape, layout = op
    out = laid_out(np.zeros(shape, dtype), layout)
    do = keng.data(out)
    if not (kernel_takes(out) and scalar_fits(dtype, value)):
        with pytest.raises((TypeError, ValueError)):
            keng.fill(do, value)
        return
    keng.fill(do, value).result(10)
    want = np.empty(shape, dtype)
    want[...] = value
    np.testing.assert_array_equal(keng.get(do), want)


def close(got, want, arr):
    if np.isnan(want):
        return np.isnan(got)
    scale = float(np.sum(np.abs(arr.astype(np.float64)))) + 1.0
    tol = 1e-5 if arr.dtype == np.float32 else 1e-12
    return abs(got - float(want)) <= tol * scale


@SETTINGS
@given(st.sampled_from(DTYPES), shapes, st.sampled_from(LAYOUTS),
       st.sampled_from(["sum", "mean", "max"]), st.data())
def test_reductions_agree_with_numpy(keng, dtype, shape, layout, kind, data):
    a = laid_out(data.draw(values(dtype, shape)), layout)
    da = keng.data(a)
    kernel = getattr(keng, kind)
    refused = (not kernel_takes(a) or a.dtype == np.bool_
               or (kind == "max" and a.size == 0))
    if refused:
        with pytest.raises((TypeError, ValueError)):
            kernel(da)
        return
    got = kernel(da).result(10)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        want = getattr(np, kind)(a)
    if a.dtype.kind == "i" and kind != "mean":
        assert got == int(want) and isinstance(got, int)
    else:
        assert close(got, want, a), (got, want)


def test_float32_sum_is_pairwise_like_numpy(keng):
    ones = keng.data(np.ones(20_000_000, dtype=np.float32))
    assert keng.sum(ones).result(30) == float(np.sum(np.ones(20_000_000, np.float32)))
    assert keng.sum(ones).result(30) == 20_000_000.0


def test_int32_sum_is_an_int64_total_like_numpy(keng):
    big = np.full(4, 2**31 - 1, dtype=np.int32)
    assert keng.sum(keng.data(big)).result(10) == int(np.sum(big)) == 4 * (2**31 - 1)


def test_non_native_byte_order_is_refused(keng):
    swapped = np.arange(4.0).astype(">f8")
    with pytest.raises(TypeError, match="native byte order"):
        keng.sum(keng.data(swapped))
