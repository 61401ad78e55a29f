//! What a fork child may use, and the one watchdog that waits for it.
//!
//! A child of a multithreaded process has one thread; the others vanished,
//! possibly holding std's stderr lock or the allocator's. So a child
//! reports with `write(2)` only ([`say`], [`write_fd`]), installs a panic
//! hook that does the same ([`quiet_panics`]), and leaves with `_exit`
//! ([`exit_now`], [`child_exit`]). The parent waits for it with
//! [`wait_child`]: a child that has not exited by the limit is killed and
//! the wait fails, so a hang is a test failure, never a hung suite.
//!
//! Limits are far above a healthy run's time; on a slow or loaded machine
//! `FORKSAFE_WATCHDOG_SCALE=N` multiplies every one of them
//! ([`watchdog_scale`]).

use forksafe_core::sync::{park_until, Clock};
use nix::sys::signal::{kill, Signal};
use nix::sys::wait::{waitpid, WaitPidFlag, WaitStatus};
use nix::unistd::{fork, getpid, ForkResult, Pid};
use std::os::fd::{AsRawFd, OwnedFd};
use std::panic::AssertUnwindSafe;
use std::time::{Duration, Instant};

/// `FORKSAFE_WATCHDOG_SCALE` (a positive integer), else 1.
pub fn watchdog_scale() -> u32 {
    std::env::var("FORKSAFE_WATCHDOG_SCALE")
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(1)
        .max(1)
}

/// `limit` scaled by [`watchdog_scale`].
pub fn scaled(limit: Duration) -> Duration {
    limit * watchdog_scale()
}

/// Writes `msg` to `fd` with `write(2)` calls only: no std lock, so it is
/// safe in a fork child whose other threads vanished holding one.
pub fn write_fd(fd: i32, msg: &str) {
    let mut b = msg.as_bytes();
    while !b.is_empty() {
        // SAFETY: writes at most `b.len()` bytes from a live buffer to `fd`.
        let n = unsafe { libc::write(fd, b.as_ptr().cast(), b.len()) };
        if n <= 0 {
            return;
        }
        b = &b[n as usize..];
    }
}

/// Writes to stderr with `write(2)`.
pub fn say(msg: &str) {
    write_fd(2, msg);
}

/// A panic hook that reports with `write(2)` only, and stays quiet about
/// panics whose message contains `expected` (panics a test raises on
/// purpose); `None` reports every panic.
pub fn quiet_panics(expected: Option<&'static str>) {
    std::panic::set_hook(Box::new(move |info| {
        let payload = info.payload();
        let msg = payload
            .downcast_ref::<String>()
            .map(String::as_str)
            .or_else(|| payload.downcast_ref::<&str>().copied())
            .unwrap_or("");
        if expected.is_none_or(|mark| !msg.contains(mark)) {
            say(&format!("    panic in pid {}: {info}\n", getpid()));
        }
    }));
}

/// Ends the process at once: no exit hooks, no destructors.
pub fn exit_now(code: i32) -> ! {
    // SAFETY: `_exit` ends the process without running the parent's exit
    // hooks or destructors, which is what a fork child must do.
    unsafe { libc::_exit(code) }
}

/// Runs `f` as the body of a fork child and leaves with `_exit`: 0 if it
/// returned `Ok` (its message reported unless empty), 1 on `Err`, 2 on
/// panic.
pub fn child_exit(f: impl FnOnce() -> Result<String, String>) -> ! {
    let code = match std::panic::catch_unwind(AssertUnwindSafe(f)) {
        Ok(Ok(msg)) => {
            if !msg.is_empty() {
                say(&format!("    child {}: {msg}\n", getpid()));
            }
            0
        }
        Ok(Err(e)) => {
            say(&format!("    child {} FAILED: {e}\n", getpid()));
            1
        }
        Err(_) => 2,
    };
    exit_now(code)
}

/// Forks with a raw `fork()` (the process's atfork handlers run, nothing
/// drains); the child runs `f` and exits with [`child_exit`].
///
/// Call it from a process whose other threads can vanish safely: a test
/// binary without libtest's threads (`harness = false`), or one whose
/// other threads are the engine's.
pub fn fork_raw(f: impl FnOnce() -> Result<String, String>) -> Result<Pid, String> {
    // SAFETY: the child only runs `f`, reports with write(2) and leaves
    // with _exit.
    match unsafe { fork() } {
        Ok(ForkResult::Child) => child_exit(f),
        Ok(ForkResult::Parent { child }) => Ok(child),
        Err(e) => Err(format!("fork failed: {e}")),
    }
}

/// The watchdog: waits for `pid`; kills it and fails once `limit` (scaled
/// by [`watchdog_scale`]) has passed. `Ok` only for an exit status of 0.
pub fn wait_child(pid: Pid, limit: Duration) -> Result<(), String> {
    let limit = scaled(limit);
    let deadline = Instant::now() + limit;
    let clock = Clock::new();
    let mut nap = Duration::from_micros(50);
    loop {
        match waitpid(pid, Some(WaitPidFlag::WNOHANG)) {
            Ok(WaitStatus::StillAlive) => {
                if Instant::now() > deadline {
                    let _ = kill(pid, Signal::SIGKILL);
                    let _ = waitpid(pid, None);
                    return Err(format!("child {pid} hung: killed after {limit:?}"));
                }
                park_until(&clock, Some(clock.deadline_after(nap)));
                nap = (nap * 2).min(Duration::from_millis(5));
            }
            Ok(WaitStatus::Exited(_, 0)) => return Ok(()),
            Ok(WaitStatus::Exited(_, code)) => return Err(format!("child {pid} exited {code}")),
            Ok(other) => return Err(format!("child {pid}: {other:?}")),
            Err(e) => return Err(format!("waitpid {pid}: {e}")),
        }
    }
}

/// Reads what is left in a pipe (its writer has exited), at most 64 KiB.
pub fn read_pipe(fd: &OwnedFd) -> String {
    let mut out = Vec::new();
    let mut buf = [0u8; 4096];
    while out.len() < 65536 {
        // SAFETY: reads at most `buf.len()` bytes into a live buffer.
        let n = unsafe { libc::read(fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len()) };
        if n <= 0 {
            break;
        }
        out.extend_from_slice(&buf[..n as usize]);
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_watchdog_passes_a_clean_exit_and_fails_the_others() {
        // libtest's threads are copied into nothing: the children below
        // only exit, so they touch no lock those threads could hold.
        let ok = fork_raw(|| Ok(String::new())).unwrap();
        assert_eq!(wait_child(ok, Duration::from_secs(30)), Ok(()));
        let failed = fork_raw(|| Err("on purpose".into())).unwrap();
        assert!(wait_child(failed, Duration::from_secs(30))
            .unwrap_err()
            .contains("exited 1"));
        // SAFETY: the child only calls pause(2) until it is killed.
        let hung = match unsafe { fork() }.unwrap() {
            ForkResult::Child => loop {
                // SAFETY: pause(2) has no preconditions.
                unsafe { libc::pause() };
            },
            ForkResult::Parent { child } => child,
        };
        let err = wait_child(hung, Duration::from_millis(200)).unwrap_err();
        assert!(err.contains("hung"), "{err}");
    }
}
