//! The built-in Rust kernels over data vars' arrays: elementwise `add`,
//! `mul`, `scale`, `copy`, `fill`, and the reductions `sum`, `mean`, `max`.
//! They run on the compute lane with the GIL released, so two of them on
//! different arrays run in parallel. They read and write through raw
//! pointers (an op may write the array it reads: `add(a, b, out=a)`), and
//! allocate nothing, so no input can make them abort.

use crate::data::{Dtype, RawElems};

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

/// The numeric element types. Integer arithmetic wraps, as numpy's does.
trait Num: Copy + Send + PartialOrd + 'static {
    fn add(self, o: Self) -> Self;
    fn mul(self, o: Self) -> Self;
    fn zero() -> Self;
    fn from_scalar(s: Scalar) -> Option<Self>;
    fn out(self) -> KernelOut;
    fn as_f64(self) -> f64;
    fn is_nan(self) -> bool;
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

/// Checks at push time that the arrays suit a kernel: one dtype, one
/// length. The message is the `TypeError`/`ValueError` to raise.
pub(crate) fn check_same(op: &str, arrays: &[RawElems]) -> Result<(), (bool, String)> {
    let Some(first) = arrays.first() else {
        return Ok(());
    };
    for a in arrays {
        if a.dtype != first.dtype {
            return Err((
                true,
                format!(
                    "{op}: dtypes differ ({} and {})",
                    first.dtype.name(),
                    a.dtype.name()
                ),
            ));
        }
        if a.len != first.len {
            return Err((
                false,
                format!("{op}: lengths differ ({} and {})", first.len, a.len),
            ));
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
    numeric!(out.dtype, T => unsafe { run::<T>(a, factor, out) }, bool => {})
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
            Reduce::Sum => Ok((0..a.len).fold(T::zero(), |s, i| s.add(at(i))).out()),
            Reduce::Mean => {
                if a.len == 0 {
                    return Ok(KernelOut::Float(f64::NAN));
                }
                let s: f64 = (0..a.len).map(|i| at(i).as_f64()).sum();
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
