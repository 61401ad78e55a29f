//! One real `fork()` in core's own tests, for what only a real child can
//! tell: the threads of the parent do not exist there, so the child's
//! engine must forget their join handles (`Exits::forget_all`) rather than
//! join them. Everything else about the child is simulated in
//! `fork_steps.rs`; the engine crate's `tests/fork.rs` forks for real with
//! the `pthread_atfork` handlers.
//!
//! The fork steps are driven by hand around `libc::fork`, as the atfork
//! handlers would run them, on a fork domain of the test's own, so the
//! other tests of this binary are not paused. This binary is multithreaded
//! (libtest), so the child keeps to what is safe there: engine calls on its
//! own engine (whose locks the gate left free), malloc (glibc resets its
//! locks), no thread start, no std output (another test thread may hold
//! its lock): it reports by exit status only and leaves with `_exit`.

use crate::support::{domain, spec};
use forksafe_core::{Config, CoreEngine};
use std::time::{Duration, Instant};

/// A child that takes longer than this is hung.
const CHILD_LIMIT: Duration = Duration::from_secs(10);

/// A fork child shuts down an engine whose workers were started in the
/// parent: shutdown joins the workers it knows of, and in the child it must
/// know of none (those threads were not copied; joining them never ends).
/// Found as the surviving mutant `Exits::forget_all` → `()`.
#[test]
fn a_fork_child_shuts_down_without_joining_the_parents_workers() {
    let domain = domain();
    let e = CoreEngine::new(
        domain,
        Config {
            compute_workers: 2,
            host_workers: 1,
            ..Config::default()
        },
    )
    .unwrap();
    for _ in 0..8 {
        e.push(spec(|| Ok(()))).unwrap();
    }
    e.wait_all().unwrap();

    domain.prepare();
    // SAFETY: the child only makes calls on its own engine (no engine lock
    // is held: prepare closed the gate), allocates, and leaves with
    // `_exit`; it starts no thread and touches no std lock.
    let pid = unsafe { libc::fork() };
    if pid == 0 {
        domain.child();
        let code = match e.shutdown(Duration::from_secs(5)) {
            Ok(report) if report.cancelled.is_empty() && report.still_running.is_empty() => 0,
            Ok(_) => 1,
            Err(_) => 2,
        };
        // SAFETY: ends the child without the parent's exit hooks.
        unsafe { libc::_exit(code) }
    }
    domain.parent();
    assert!(pid > 0, "fork failed");
    let status = wait_bounded(pid, CHILD_LIMIT);
    assert_eq!(status, Some(0), "child exit status (None: hung, killed)");
    e.shutdown(Duration::from_secs(5)).unwrap();
}

/// Waits for `pid`: its exit code, or `None` if it had to be killed after
/// `limit` (or ended by a signal).
fn wait_bounded(pid: libc::pid_t, limit: Duration) -> Option<i32> {
    let deadline = Instant::now() + limit;
    loop {
        let mut status = 0;
        // SAFETY: waits for our own child; `status` is a live out-pointer.
        let rc = unsafe { libc::waitpid(pid, &mut status, libc::WNOHANG) };
        if rc == pid {
            return libc::WIFEXITED(status).then(|| libc::WEXITSTATUS(status));
        }
        if Instant::now() > deadline {
            // SAFETY: kills and reaps our own hung child.
            unsafe {
                libc::kill(pid, libc::SIGKILL);
                libc::waitpid(pid, &mut status, 0);
            }
            return None;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}
