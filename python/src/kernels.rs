//! The built-in Rust kernels over data vars' arrays: elementwise `add`,
//! `mul`, `scale`, `copy`, `fill`, and the reductions `sum`, `mean`, `max`.
//! They run on the compute lane with the GIL released, so two of them on
//! different arrays run in parallel. They read and write through raw
//! pointers (an op may write the array it reads: `add(a, b, out=a)`), and
//! allocate nothing, so no input can make them abort.
//!
//! Each gives what the numpy expression gives, or is refused at push:
//! elementwise operands have one dtype, one shape (no broadcasting) and
//! one memory order (they walk memory, not indices; 0-d and 1-d arrays
//! pair with either order); `add`/`mul` of bools are `or`/`and`, and
//! `scale` of a bool array takes a bool factor (`and`), as numpy's
//! operators do; integer arithmetic wraps, as numpy's does; `sum` of an
//! integer array is an int64 total, of a float array numpy's pairwise
//! summation in the array's dtype; reductions of bool arrays and `max` of
//! an empty array are refused.

use crate::data::{Dtype, KernelView, RawElems};

/// A kernel's result, turned into a Python value by its future.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum KernelOut {
    Nothing,
    Float(f64),
    Int(i64),
}

/// An elementwise operation of two arrays.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Binary {
    Add,
    Mul,
}

/// A reduction of one array.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Reduce {
    Sum,
    Mean,
    Max,
}

/// A scalar argument, converted to the array's dtype at push time.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Scalar {
    Float(f64),
    Int(i64),
    Bool(bool),
}

/// As Python writes it, with its type: `1.5 (float)`, `True (bool)`.
impl std::fmt::Display for Scalar {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Scalar::Float(x) => write!(f, "{x:?} (float)"),
            Scalar::Int(x) => write!(f, "{x} (int)"),
            Scalar::Bool(true) => write!(f, "True (bool)"),
            Scalar::Bool(false) => write!(f, "False (bool)"),
        }
    }
}

/// Why a kernel push is refused: the Python exception's class and text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Refused {
    /// `TypeError`: a dtype or layout the kernel does not take.
    Type(String),
    /// `ValueError`: shapes that differ, an empty `max`.
    Value(String),
}

/// How kernel `kind` is called, for a `TypeError` on wrong arguments.
pub(crate) fn signature(kind: &str) -> String {
    let how = match kind {
        "add" | "mul" => "two Data inputs and out=",
        "scale" => "one Data input, a number and out=",
        "copy" => "one Data input and out=",
        "fill" => "out= and a value",
        _ => "one Data input",
    };
    format!("{kind} takes {how}")
}

fn shape_text(shape: &[usize]) -> String {
    match shape {
        [one] => format!("({one},)"),
        _ => format!(
            "({})",
            shape
                .iter()
                .map(|d| d.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        ),
    }
}

/// The numeric element types. Integer arithmetic wraps, as numpy's does.
trait Num: Copy + Send + PartialOrd + 'static {
    fn add(self, o: Self) -> Self;
    fn mul(self, o: Self) -> Self;
    fn zero() -> Self;
    fn from_scalar(s: Scalar) -> Option<Self>;
    fn out(self) -> KernelOut;
    fn as_f64(self) -> f64;
    fn is_nan(self) -> bool;
    /// The total of `n` elements from `at`, as numpy's `sum` gives it:
    /// pairwise in the float dtypes, a wrapping int64 total for integers.
    fn total(at: &impl Fn(usize) -> Self, n: usize) -> KernelOut;
}

/// numpy's pairwise summation (its `pairwise_sum` loop): fewer than 8
/// elements in a row; up to 128 with eight running sums combined in a
/// tree; more, split in two halves (the first a multiple of 8) summed
/// recursively. Its error grows with the log of `n`, not with `n`.
fn pairwise<A: Num>(at: &impl Fn(usize) -> A, start: usize, n: usize) -> A {
    if n < 8 {
        return (start..start + n).fold(A::zero(), |s, i| s.add(at(i)));
    }
    if n <= 128 {
        let mut r: [A; 8] = std::array::from_fn(|j| at(start + j));
        let mut i = 8;
        while i < n - n % 8 {
            for (j, rj) in r.iter_mut().enumerate() {
                *rj = rj.add(at(start + i + j));
            }
            i += 8;
        }
        let mut res = (r[0].add(r[1]).add(r[2].add(r[3]))).add(r[4].add(r[5]).add(r[6].add(r[7])));
        while i < n {
            res = res.add(at(start + i));
            i += 1;
        }
        return res;
    }
    let half = n / 2 - (n / 2) % 8;
    pairwise(at, start, half).add(pairwise(at, start + half, n - half))
}

macro_rules! float {
    ($t:ty) => {
        impl Num for $t {
            fn add(self, o: Self) -> Self {
                self + o
            }
            fn mul(self, o: Self) -> Self {
                self * o
            }
            fn zero() -> Self {
                0.0
            }
            fn from_scalar(s: Scalar) -> Option<Self> {
                match s {
                    Scalar::Float(x) => Some(x as $t),
                    Scalar::Int(x) => Some(x as $t),
                    Scalar::Bool(_) => None,
                }
            }
            fn out(self) -> KernelOut {
                KernelOut::Float(self as f64)
            }
            fn as_f64(self) -> f64 {
                self as f64
            }
            fn is_nan(self) -> bool {
                <$t>::is_nan(self)
            }
            fn total(at: &impl Fn(usize) -> Self, n: usize) -> KernelOut {
                KernelOut::Float(pairwise(at, 0, n) as f64)
            }
        }
    };
}

macro_rules! int {
    ($t:ty) => {
        impl Num for $t {
            fn add(self, o: Self) -> Self {
                self.wrapping_add(o)
            }
            fn mul(self, o: Self) -> Self {
                self.wrapping_mul(o)
            }
            fn zero() -> Self {
                0
            }
            fn from_scalar(s: Scalar) -> Option<Self> {
                match s {
                    Scalar::Int(x) => <$t>::try_from(x).ok(),
                    Scalar::Float(_) | Scalar::Bool(_) => None,
                }
            }
            fn out(self) -> KernelOut {
                KernelOut::Int(self as i64)
            }
            fn as_f64(self) -> f64 {
                self as f64
            }
            fn is_nan(self) -> bool {
                false
            }
            fn total(at: &impl Fn(usize) -> Self, n: usize) -> KernelOut {
                KernelOut::Int((0..n).fold(0_i64, |s, i| s.wrapping_add(at(i) as i64)))
            }
        }
    };
}

float!(f32);
float!(f64);
int!(i32);
int!(i64);

/// Runs `$body` with `$t` bound to the element type of `$dtype` (numeric
/// dtypes; `$other` for bool).
macro_rules! numeric {
    ($dtype:expr, $t:ident => $body:expr, bool => $other:expr) => {
        match $dtype {
            Dtype::F64 => {
                type $t = f64;
                $body
            }
            Dtype::F32 => {
                type $t = f32;
                $body
            }
            Dtype::I64 => {
                type $t = i64;
                $body
            }
            Dtype::I32 => {
                type $t = i32;
                $body
            }
            Dtype::Bool => $other,
        }
    };
}

/// Checks at push time that the operands suit kernel `op` (the module's
/// rules): for an elementwise kernel one dtype, one shape, one memory
/// order; for a reduction a numeric array, and a non-empty one for `max`.
pub(crate) fn check_operands(op: &str, views: &[&KernelView]) -> Result<(), Refused> {
    let Some(first) = views.first() else {
        return Ok(());
    };
    if views.len() == 1 && matches!(op, "sum" | "mean" | "max") {
        if first.raw.dtype == Dtype::Bool {
            return Err(Refused::Type(format!(
                "{op}: the kernels reduce numeric arrays, not bool (use a Python callback)"
            )));
        }
        if op == "max" && first.raw.len == 0 {
            return Err(Refused::Value(
                "max: zero-size array to reduction operation maximum which has no identity".into(),
            ));
        }
        return Ok(());
    }
    for v in views {
        if v.raw.dtype != first.raw.dtype {
            return Err(Refused::Type(format!(
                "{op}: dtypes differ ({} and {})",
                first.raw.dtype.name(),
                v.raw.dtype.name()
            )));
        }
        if v.shape != first.shape {
            return Err(Refused::Value(format!(
                "{op}: shapes differ ({} and {}); the kernels do not broadcast",
                shape_text(&first.shape),
                shape_text(&v.shape)
            )));
        }
        if !v.raw.order.agrees(first.raw.order) {
            return Err(Refused::Type(format!(
                "{op}: memory orders differ ({} and {}); make them one order \
                 (numpy.ascontiguousarray or numpy.asfortranarray)",
                first.raw.order.name(),
                v.raw.order.name()
            )));
        }
    }
    Ok(())
}

/// Whether a scalar converts to `dtype` (checked at push time).
pub(crate) fn scalar_fits(dtype: Dtype, s: Scalar) -> bool {
    numeric!(dtype, T => T::from_scalar(s).is_some(), bool => matches!(s, Scalar::Bool(_)))
}

/// `out[i] = a[i] op b[i]`.
///
/// # Safety
///
/// Each of `a`, `b`, `out` is `len` aligned, initialised elements of its
/// dtype in a live array (checked at registration and push: one dtype, one
/// length), and no other thread reads or writes `out` or writes `a` or `b`
/// meanwhile (the engine's access grant, I9). `out` may be `a` or `b`.
pub(crate) unsafe fn binary(op: Binary, a: RawElems, b: RawElems, out: RawElems) {
    unsafe fn run<T: Num>(op: Binary, a: RawElems, b: RawElems, out: RawElems) {
        let (pa, pb, po) = (a.ptr as *const T, b.ptr as *const T, out.ptr as *mut T);
        for i in 0..out.len {
            // SAFETY: `i < len` of each (the caller's contract); reads come
            // before the write of the same index, so `out` may alias.
            unsafe {
                let (x, y) = (pa.add(i).read(), pb.add(i).read());
                po.add(i).write(match op {
                    Binary::Add => x.add(y),
                    Binary::Mul => x.mul(y),
                });
            }
        }
    }
    // SAFETY: forwarded from the caller; the dtype picks the matching `T`.
    numeric!(out.dtype, T => unsafe { run::<T>(op, a, b, out) }, bool => {
        // SAFETY: as above, with bool: add is or, mul is and (numpy's).
        let (pa, pb, po) = (a.ptr as *const bool, b.ptr as *const bool, out.ptr as *mut bool);
        for i in 0..out.len {
            // SAFETY: `i < len`, as above.
            unsafe {
                let (x, y) = (pa.add(i).read(), pb.add(i).read());
                po.add(i).write(match op { Binary::Add => x || y, Binary::Mul => x && y });
            }
        }
    })
}

/// `out[i] = a[i] * factor`.
///
/// # Safety
///
/// As [`binary`]; `factor` fits the dtype ([`scalar_fits`]).
pub(crate) unsafe fn scale(a: RawElems, factor: Scalar, out: RawElems) {
    unsafe fn run<T: Num>(a: RawElems, factor: Scalar, out: RawElems) {
        let Some(f) = T::from_scalar(factor) else {
            return;
        };
        let (pa, po) = (a.ptr as *const T, out.ptr as *mut T);
        for i in 0..out.len {
            // SAFETY: `i < len` of both (the caller's contract).
            unsafe { po.add(i).write(pa.add(i).read().mul(f)) }
        }
    }
    // SAFETY: forwarded from the caller.
    numeric!(out.dtype, T => unsafe { run::<T>(a, factor, out) }, bool => {
        // numpy's `bool_array * True`: and.
        if let Scalar::Bool(f) = factor {
            let (pa, po) = (a.ptr as *const bool, out.ptr as *mut bool);
            for i in 0..out.len {
                // SAFETY: `i < len` of both (the caller's contract).
                unsafe { po.add(i).write(pa.add(i).read() && f) }
            }
        }
    })
}

/// `out[i] = src[i]` (any of the dtypes, bytes copied).
///
/// # Safety
///
/// As [`binary`]; `src` and `out` may overlap.
pub(crate) unsafe fn copy(src: RawElems, out: RawElems) {
    let size = match out.dtype {
        Dtype::F64 | Dtype::I64 => 8,
        Dtype::F32 | Dtype::I32 => 4,
        Dtype::Bool => 1,
    };
    // SAFETY: both are `len * size` bytes of live arrays (the caller's
    // contract); `copy` allows overlap.
    unsafe { std::ptr::copy(src.ptr as *const u8, out.ptr as *mut u8, out.len * size) }
}

/// `out[i] = value`.
///
/// # Safety
///
/// As [`binary`]; `value` fits the dtype ([`scalar_fits`]).
pub(crate) unsafe fn fill(out: RawElems, value: Scalar) {
    unsafe fn run<T: Num>(out: RawElems, value: Scalar) {
        let Some(v) = T::from_scalar(value) else {
            return;
        };
        let po = out.ptr as *mut T;
        for i in 0..out.len {
            // SAFETY: `i < len` (the caller's contract).
            unsafe { po.add(i).write(v) }
        }
    }
    // SAFETY: forwarded from the caller.
    numeric!(out.dtype, T => unsafe { run::<T>(out, value) }, bool => {
        if let Scalar::Bool(v) = value {
            let po = out.ptr as *mut bool;
            for i in 0..out.len {
                // SAFETY: `i < len` (the caller's contract).
                unsafe { po.add(i).write(v) }
            }
        }
    })
}

/// `sum`, `mean` or `max` of `a`; an error for `max` of no elements (as
/// numpy's) and for reductions of bool arrays.
///
/// # Safety
///
/// `a` is `len` aligned, initialised elements of its dtype in a live array,
/// and no other thread writes it meanwhile (I9).
pub(crate) unsafe fn reduce(op: Reduce, a: RawElems) -> Result<KernelOut, String> {
    unsafe fn run<T: Num>(op: Reduce, a: RawElems) -> Result<KernelOut, String> {
        let pa = a.ptr as *const T;
        // SAFETY: `i < len` (the caller's contract).
        let at = |i: usize| unsafe { pa.add(i).read() };
        match op {
            Reduce::Sum => Ok(T::total(&at, a.len)),
            Reduce::Mean => {
                if a.len == 0 {
                    return Ok(KernelOut::Float(f64::NAN));
                }
                // numpy's mean: a pairwise sum in float64 for integers, in
                // the array's dtype for floats, then divided.
                let s = match T::total(&at, a.len) {
                    KernelOut::Float(s) => s,
                    _ => pairwise(&|i| at(i).as_f64(), 0, a.len),
                };
                Ok(KernelOut::Float(s / a.len as f64))
            }
            Reduce::Max => {
                if a.len == 0 {
                    return Err("max of an empty array (no identity)".into());
                }
                let mut m = at(0);
                for i in 1..a.len {
                    let x = at(i);
                    // A NaN wins, as in numpy's max.
                    if x > m || x.is_nan() {
                        m = x;
                    }
                    if m.is_nan() {
                        break;
                    }
                }
                Ok(m.out())
            }
        }
    }
    // SAFETY: forwarded from the caller.
    numeric!(a.dtype, T => unsafe { run::<T>(op, a) }, bool => {
        Err("reductions take numeric arrays, not bool".into())
    })
}
