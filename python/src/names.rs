//! Op names shared by many pushes: a callback's name (its `__qualname__`,
//! or `name=`) is kept once for the process and every op pushed with it
//! points at that copy, instead of each pending op holding an allocation
//! of its own.
//!
//! # State
//!
//! One table of interned names behind a leaf lock that is only ever tried
//! (`try_lock`), never waited for: taken by a push (which holds the GIL),
//! for one lookup or insert.
//!
//! | state | move | who | serves |
//! |---|---|---|---|
//! | absent → interned | first push with the name, while the table has fewer than [`MAX_NAMES`] names and the name is at most [`MAX_LEN`] bytes | a pusher | names repeat, so a pending op costs no name allocation |
//! | interned | never removed: the copy lives for the process | — | an op's name outlives any op; the table is bounded (at most `MAX_NAMES × MAX_LEN` bytes) |
//!
//! A name that does not fit, or a try that fails (another thread holds the
//! lock, or a fork child's copy of it was copied held), gives the op an
//! owned copy of its name: a push never waits here and never fails here.

use forksafe::OpName;
use forksafe_core::sync::{LockRank, Mutex};
use std::collections::HashSet;

/// At most this many names are interned.
const MAX_NAMES: usize = 1024;

/// Longer names are never interned.
const MAX_LEN: usize = 128;

static TABLE: Mutex<Option<HashSet<&'static str>>> = Mutex::ranked(None, LockRank::Leaf);

/// The op name for `name`: the interned copy, or an owned one.
pub(crate) fn op_name(name: &str) -> OpName {
    if name.len() <= MAX_LEN {
        if let Some(mut table) = TABLE.try_lock() {
            let table = table.get_or_insert_with(HashSet::new);
            if let Some(kept) = table.get(name) {
                return OpName::from_static(kept);
            }
            if table.len() < MAX_NAMES {
                let kept: &'static str = Box::leak(name.into());
                table.insert(kept);
                return OpName::from_static(kept);
            }
        }
    }
    OpName::from(name.to_string())
}
