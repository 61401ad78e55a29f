//! What a fork child may use (docs/DESIGN.md, "Testing real forks"): reports go
//! out with one `write(2)`, the child leaves with `_exit`, and the parent
//! waits for it under a watchdog that kills it and fails, never hangs.

use crate::program::PANIC_MARK;
use nix::sys::signal::{kill, Signal};
use nix::sys::wait::{waitpid, WaitPidFlag, WaitStatus};
use nix::unistd::Pid;
use std::os::fd::{AsRawFd, OwnedFd};
use std::time::{Duration, Instant};

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

/// A panic hook that stays quiet about the panics programs raise on
/// purpose and reports any other with `write(2)` (std's stderr lock may be
/// held by a vanished thread in a fork child).
pub fn quiet_panic_hook() {
    std::panic::set_hook(Box::new(|info| {
        let payload = info.payload();
        let msg = payload
            .downcast_ref::<String>()
            .map(String::as_str)
            .or_else(|| payload.downcast_ref::<&str>().copied())
            .unwrap_or("");
        if !msg.contains(PANIC_MARK) {
            say(&format!("panic in pid {}: {info}\n", std::process::id()));
        }
    }));
}

/// Ends a fork child at once: no exit hooks, no destructors.
pub fn exit_now(code: i32) -> ! {
    // SAFETY: `_exit` ends the process without running the parent's exit
    // hooks or destructors, which is what a fork child must do.
    unsafe { libc::_exit(code) }
}

/// Waits for `pid` under a watchdog: kills it and fails after `limit`.
pub fn wait_child(pid: Pid, limit: Duration) -> Result<(), String> {
    let deadline = Instant::now() + limit;
    let mut nap = Duration::from_micros(50);
    loop {
        match waitpid(pid, Some(WaitPidFlag::WNOHANG)) {
            Ok(WaitStatus::StillAlive) => {
                if Instant::now() > deadline {
                    let _ = kill(pid, Signal::SIGKILL);
                    let _ = waitpid(pid, None);
                    return Err(format!("child {pid} hung: killed after {limit:?}"));
                }
                std::thread::sleep(nap);
                nap = (nap * 2).min(Duration::from_millis(5));
            }
            Ok(WaitStatus::Exited(_, 0)) => return Ok(()),
            Ok(WaitStatus::Exited(_, code)) => return Err(format!("child {pid} exited {code}")),
            Ok(other) => return Err(format!("child {pid}: {other:?}")),
            Err(e) => return Err(format!("waitpid {pid}: {e}")),
        }
    }
}

/// Reads what is left in a pipe (the child has exited), at most 64 KiB.
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
