//! What a fork child may use (docs/DESIGN.md, "Testing real forks"): the
//! testkit's child helpers and its one watchdog ([`wait_child`]), plus the
//! panic hook that keeps quiet about the panics programs raise on purpose.

use crate::program::PANIC_MARK;
pub use forksafe_testkit::child::{exit_now, read_pipe, say, wait_child, write_fd};

/// A panic hook that stays quiet about the panics programs raise on
/// purpose ([`PANIC_MARK`]) and reports any other with `write(2)` (std's
/// stderr lock may be held by a vanished thread in a fork child).
pub fn quiet_panic_hook() {
    forksafe_testkit::child::quiet_panics(Some(PANIC_MARK));
}
