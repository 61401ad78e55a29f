//! Op names in two machine words: a `&'static str` is kept as is, any other
//! name as an owned boxed string. Every pending op carries one, so its size
//! counts toward the memory per pending op (BENCHMARKS.md).

use std::fmt;
use std::ptr::NonNull;

/// Set in `len` when `ptr` owns a `Box<str>`; string lengths never reach it
/// (an allocation is at most `isize::MAX` bytes).
const OWNED: usize = 1 << (usize::BITS - 1);

/// The name of an op, given at push: a string literal is stored without
/// copying; a `String` is kept as is.
///
/// ```
/// use forksafe_core::OpName;
/// let a = OpName::from("step");
/// let b = OpName::from(format!("step {}", 2));
/// assert_eq!(&*a, "step");
/// assert_eq!(b.as_str(), "step 2");
/// assert_eq!(OpName::default().as_str(), "op");
/// ```
pub struct OpName {
    ptr: NonNull<u8>,
    /// The length in bytes, with [`OWNED`] set for an owned name.
    len: usize,
}

// SAFETY: an `OpName` is either a `&'static str` or a `Box<str>`, both of
// which are `Send` and `Sync`; it offers only shared access to the bytes.
unsafe impl Send for OpName {}
// SAFETY: as above.
unsafe impl Sync for OpName {}

impl OpName {
    /// A name borrowed for the whole program (no allocation).
    pub fn from_static(name: &'static str) -> Self {
        OpName {
            // A `&str` is never null, also when empty (then it dangles,
            // aligned, as a zero-length slice may).
            ptr: NonNull::from(name.as_bytes()).cast(),
            len: name.len(),
        }
    }

    /// An owned name.
    pub fn from_boxed(name: Box<str>) -> Self {
        let len = name.len();
        OpName {
            ptr: NonNull::from(Box::leak(name)).cast(),
            len: len | OWNED,
        }
    }

    /// The name as a string slice.
    pub fn as_str(&self) -> &str {
        let len = self.len & !OWNED;
        // SAFETY: `ptr` and `len` are those of a `str` that lives at least
        // as long as `self`: `'static`, or the box `self` owns and frees only
        // in `drop`. The bytes are never written through `ptr`.
        unsafe { std::str::from_utf8_unchecked(std::slice::from_raw_parts(self.ptr.as_ptr(), len)) }
    }

    fn is_owned(&self) -> bool {
        self.len & OWNED != 0
    }
}

impl Drop for OpName {
    fn drop(&mut self) {
        if self.is_owned() {
            let len = self.len & !OWNED;
            let slice = std::ptr::slice_from_raw_parts_mut(self.ptr.as_ptr(), len);
            // SAFETY: an owned name's `ptr`/`len` came from `Box::leak` of a
            // `Box<str>` of that length in `from_boxed`, and this is the only
            // place that frees it, once.
            drop(unsafe { Box::from_raw(slice as *mut str) });
        }
    }
}

impl Clone for OpName {
    fn clone(&self) -> Self {
        if self.is_owned() {
            OpName::from_boxed(self.as_str().into())
        } else {
            OpName {
                ptr: self.ptr,
                len: self.len,
            }
        }
    }
}

impl Default for OpName {
    /// `"op"`, the name of an op pushed without one.
    fn default() -> Self {
        OpName::from_static("op")
    }
}

impl std::ops::Deref for OpName {
    type Target = str;
    fn deref(&self) -> &str {
        self.as_str()
    }
}

impl From<&'static str> for OpName {
    fn from(name: &'static str) -> Self {
        OpName::from_static(name)
    }
}

impl From<String> for OpName {
    fn from(name: String) -> Self {
        OpName::from_boxed(name.into_boxed_str())
    }
}

impl From<&String> for OpName {
    fn from(name: &String) -> Self {
        OpName::from_boxed(name.as_str().into())
    }
}

impl From<Box<str>> for OpName {
    fn from(name: Box<str>) -> Self {
        OpName::from_boxed(name)
    }
}

impl PartialEq for OpName {
    fn eq(&self, other: &Self) -> bool {
        self.as_str() == other.as_str()
    }
}
impl Eq for OpName {}

impl fmt::Debug for OpName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self.as_str(), f)
    }
}

impl fmt::Display for OpName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::OpName;

    #[test]
    fn static_and_owned_names_read_back_and_clone() {
        let owned = String::from("owned name");
        for (name, text) in [
            (OpName::from("literal"), "literal"),
            (OpName::from(owned.clone()), "owned name"),
            (OpName::from(&owned), "owned name"),
            (OpName::from(""), ""),
            (OpName::from(String::new()), ""),
        ] {
            let copy = name.clone();
            drop(name);
            assert_eq!(copy.as_str(), text);
            assert_eq!(format!("{copy}"), text);
            assert_eq!(format!("{copy:?}"), format!("{text:?}"));
        }
    }

    #[test]
    fn a_static_name_is_not_copied_and_an_owned_one_is() {
        let literal: &'static str = "lit";
        assert_eq!(OpName::from(literal).as_str().as_ptr(), literal.as_ptr());
        let boxed: Box<str> = "boxed".into();
        let at = boxed.as_ptr();
        let name = OpName::from(boxed);
        assert_eq!(name.as_str().as_ptr(), at);
        assert_ne!(name.clone().as_str().as_ptr(), at);
    }

    #[test]
    fn a_name_is_two_words() {
        assert_eq!(
            std::mem::size_of::<OpName>(),
            2 * std::mem::size_of::<usize>()
        );
    }
}
