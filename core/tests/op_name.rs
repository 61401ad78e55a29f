//! `OpName`: names compare by their text whatever they were made from, and
//! an owned name gives its bytes back when dropped. The second is checked
//! with a global allocator that counts, per thread, the bytes allocated and
//! freed (per thread, so libtest's other test threads do not disturb it).
//! It is the allocator of the whole test binary; it only passes each call
//! on to `System` after bumping a thread-local counter.

use forksafe_core::OpName;
use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

struct PerThreadCounting;

thread_local! {
    /// Bytes allocated minus bytes freed on this thread.
    static LIVE: Cell<isize> = const { Cell::new(0) };
}

// SAFETY: every call is passed on to `System` unchanged; the counter is a
// const-initialised thread-local `Cell` without a destructor, which never
// allocates.
unsafe impl GlobalAlloc for PerThreadCounting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let _ = LIVE.try_with(|l| l.set(l.get() + layout.size() as isize));
        // SAFETY: the caller's contract for `alloc`, passed on.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        let _ = LIVE.try_with(|l| l.set(l.get() - layout.size() as isize));
        // SAFETY: the caller's contract for `dealloc`, passed on.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static COUNTING: PerThreadCounting = PerThreadCounting;

fn live() -> isize {
    LIVE.with(Cell::get)
}

#[test]
fn names_compare_by_text_whatever_they_were_made_from() {
    let literal = OpName::from("step");
    let owned = OpName::from(String::from("step"));
    let boxed = OpName::from(Box::<str>::from("step"));
    assert_eq!(literal, owned);
    assert_eq!(owned, boxed);
    assert_eq!(owned.clone(), literal);
    assert_ne!(literal, OpName::from("other"));
    assert_ne!(owned, OpName::from(String::from("steps")));
    assert_ne!(OpName::default(), OpName::from(""));
}

#[test]
fn an_owned_name_frees_its_bytes_when_dropped() {
    let before = live();
    for i in 0..1000 {
        let name = OpName::from(format!("op number {i}"));
        let copy = name.clone();
        assert_eq!(copy.as_str(), format!("op number {i}"));
    }
    assert_eq!(live(), before, "owned names leaked bytes");
}

#[test]
fn a_literal_name_allocates_nothing() {
    let before = live();
    let mut names: Vec<OpName> = Vec::with_capacity(100);
    let with_vec = live();
    for _ in 0..100 {
        names.push(OpName::from("literal"));
    }
    assert_eq!(live(), with_vec, "a literal name allocated");
    drop(names);
    assert_eq!(live(), before);
}
