"""Registered arrays are memory-safe (python/src/data.rs, "Memory safety"):
no numpy call moves or frees a buffer a kernel may be using, and a change
the kernels cannot follow (read-only, a replaced buffer) is refused at
push with a typed error. Each probe checks that the engine works after."""

from __future__ import annotations

import pickle
import threading

import numpy as np
import pytest

import forksafe
from conftest import run_python


def still_works(eng):
    d = eng.data(np.arange(3.0))
    assert eng.sum(d).result(10) == 3.0


def test_resize_of_a_registered_array_is_refused(eng):
    a = np.zeros(1000)
    d = eng.data(a)
    with pytest.raises(ValueError):
        a.resize(10_000_000, refcheck=False)
    eng.fill(d, 2.0).result(10)
    assert eng.get(d).sum() == 2000.0
    still_works(eng)


def test_resize_inside_a_callback_fails_that_op_only(eng):
    a = np.zeros(1000)
    d = eng.data(a)
    gate = threading.Event()
    eng.push(lambda: gate.wait(10))
    queued = eng.fill(d, 1.0)

    def shrink(arr):
        arr.resize(1, refcheck=False)

    fut = eng.push(shrink, writes=[d])
    gate.set()
    queued.result(10)
    with pytest.raises(ValueError):
        fut.result(10)
    # The failed callback poisoned what it writes; the array is unchanged.
    with pytest.raises(ValueError):
        eng.get(d)
    eng.clear_poison(d)
    assert eng.get(d).shape == (1000,) and eng.get(d).sum() == 1000.0
    still_works(eng)


def test_resize_of_the_base_of_a_registered_view_is_refused(eng):
    base = np.zeros(100)
    d = eng.data(base[10:20])
    with pytest.raises(ValueError):
        base.resize(100_000, refcheck=False)
    eng.fill(d, 5.0).result(10)
    assert base[10:20].tolist() == [5.0] * 10 and base[:10].sum() == 0.0


def test_a_buffer_object_cannot_be_resized_while_registered(eng):
    buf = bytearray(8 * 16)
    d = eng.data(buf)
    with pytest.raises(BufferError):
        buf.extend(b"x" * 4096)
    # uint8 is no kernel dtype: refused, nothing written.
    with pytest.raises(TypeError):
        eng.fill(d, 1)
    assert bytes(buf) == bytes(8 * 16)
    still_works(eng)


def test_fill_of_a_bytearray_view_is_a_type_error(eng):
    d = eng.data(bytearray(16))
    with pytest.raises(TypeError, match="native byte order"):
        eng.fill(d, 1)


def test_an_output_made_read_only_after_registration_is_refused(eng):
    a = np.zeros(4)
    d = eng.data(a)
    a.flags.writeable = False
    with pytest.raises(ValueError, match="read-only"):
        eng.fill(d, 1.0)
    with pytest.raises(ValueError, match="read-only"):
        eng.push(lambda arr: None, writes=[d])
    assert a.tolist() == [0.0] * 4, "a read-only array was written"
    # Reading it is fine.
    assert eng.sum(d).result(10) == 0.0
    a.flags.writeable = True
    eng.fill(d, 1.0).result(10)
    assert a.tolist() == [1.0] * 4


def test_a_dtype_changed_in_place_is_followed(eng):
    a = np.zeros(4, dtype=np.float64)
    d = eng.data(a)
    a.dtype = np.int32  # the same 32 bytes, now 8 int32s
    eng.fill(d, 3).result(10)
    assert a.tolist() == [3] * 8
    with pytest.raises(TypeError):
        eng.fill(d, 1.5)


def test_a_replaced_buffer_is_refused(eng):
    a = np.arange(4.0)
    d = eng.data(a)
    a.__setstate__(pickle.loads(pickle.dumps(np.arange(8.0))).__reduce__()[2])
    with pytest.raises(ValueError, match="replaced"):
        eng.sum(d)
    still_works(eng)


def test_resize_under_queued_kernels_leaves_a_clean_exit():
    code = """
import numpy as np, forksafe, threading
eng = forksafe.Engine(compute_workers=1, host_workers=1)
a = np.zeros(1 << 20)
d = eng.data(a)
gate = threading.Event()
eng.push(lambda: gate.wait(10))
futs = [eng.fill(d, float(i)) for i in range(50)]
refused = 0
for _ in range(50):
    try:
        a.resize(1 << 22, refcheck=False)
    except ValueError:
        refused += 1
gate.set()
for f in futs:
    f.result(10)
assert refused == 50 and a.shape == (1 << 20,) and a[0] == 49.0
print("ok")
"""
    rc, out, err, _ = run_python(code, timeout=60)
    assert rc == 0 and out.strip() == "ok", err
