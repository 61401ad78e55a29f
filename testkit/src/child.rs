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
//! ([`watchdog_scale`]; CI sets 3).
//!
//! When the watchdog fires it says which child hung and where: a child
//! names its current stage with [`stage`] (plain stores into a shared
//! anonymous mapping, [`stage_board`], that every descendant of the
//! process inherits: nothing a fork child cannot do), and the watchdog
//! reads the hung child's last stage and, where `gdb` is installed, its
//! threads' stacks, before it kills it.

use forksafe_core::sync::{park_until, Clock};
#[cfg(not(any(loom, shuttle)))]
use forksafe_core::sync::{AtomicUsize, Ordering};
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

/// Slots of the stage board: one per child, by pid modulo this.
#[cfg_attr(any(loom, shuttle), allow(dead_code))]
const STAGE_SLOTS: usize = 256;
/// Bytes per slot: the pid (4), the text's length (1), the text.
const STAGE_SLOT_BYTES: usize = 128;
const STAGE_TEXT: usize = STAGE_SLOT_BYTES - 5;

/// The stage board's address (0: not mapped in this process lineage yet).
#[cfg(not(any(loom, shuttle)))]
static STAGE_BOARD: AtomicUsize = AtomicUsize::new(0);

/// Maps the stage board if this process has none (a shared anonymous
/// mapping of 32 KiB, inherited by every later fork child and shared with
/// it). [`fork_raw`] calls it; a test that forks another way
/// (`forksafe::fork`, `os.fork`) calls it once before its first fork, or
/// its children's stages are not seen. Returns whether a board is mapped.
pub fn stage_board() -> bool {
    #[cfg(not(any(loom, shuttle)))]
    {
        if STAGE_BOARD.load(Ordering::Acquire) != 0 {
            return true;
        }
        // SAFETY: a fresh anonymous mapping; no existing memory is touched.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                STAGE_SLOTS * STAGE_SLOT_BYTES,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return false;
        }
        if STAGE_BOARD
            .compare_exchange(0, p as usize, Ordering::AcqRel, Ordering::Acquire)
            .is_err()
        {
            // Another thread mapped one first: keep that one.
            // SAFETY: `p` is the mapping made above, used by nobody.
            unsafe { libc::munmap(p, STAGE_SLOTS * STAGE_SLOT_BYTES) };
        }
        true
    }
    #[cfg(any(loom, shuttle))]
    false
}

/// The calling process's slot of the board, with its pid, if mapped.
fn stage_slot(pid: i32) -> Option<*mut u8> {
    #[cfg(not(any(loom, shuttle)))]
    {
        let base = STAGE_BOARD.load(Ordering::Acquire);
        if base == 0 {
            return None;
        }
        let i = (pid as u32 as usize) % STAGE_SLOTS;
        Some((base + i * STAGE_SLOT_BYTES) as *mut u8)
    }
    #[cfg(any(loom, shuttle))]
    {
        let _ = pid;
        None
    }
}

/// Names the stage the calling process is at (the first 123 bytes of
/// `what`), for the watchdog to print if it hangs there. Safe in a fork
/// child: plain stores, no lock, no allocation. Without a board (see
/// [`stage_board`]) it does nothing.
pub fn stage(what: &str) {
    let pid = getpid().as_raw();
    let Some(slot) = stage_slot(pid) else {
        return;
    };
    let text = &what.as_bytes()[..what.len().min(STAGE_TEXT)];
    // SAFETY: `slot` points at this pid's 128 bytes of the live board,
    // which is never unmapped; volatile stores, since another process
    // (the watchdog) reads them.
    unsafe {
        std::ptr::write_volatile(slot.add(4), 0);
        for (i, b) in text.iter().enumerate() {
            std::ptr::write_volatile(slot.add(5 + i), *b);
        }
        std::ptr::write_volatile(slot.cast::<i32>(), pid);
        std::ptr::write_volatile(slot.add(4), text.len() as u8);
    }
}

/// The last stage `pid` named, if it named one on this process's board.
pub fn stage_of(pid: Pid) -> Option<String> {
    let slot = stage_slot(pid.as_raw())?;
    // SAFETY: reads 128 bytes of the live board; a child writing meanwhile
    // can only make the text stale or cut, never read out of bounds (the
    // length is capped).
    unsafe {
        if std::ptr::read_volatile(slot.cast::<i32>()) != pid.as_raw() {
            return None;
        }
        let len = usize::from(std::ptr::read_volatile(slot.add(4))).min(STAGE_TEXT);
        let bytes: Vec<u8> = (0..len)
            .map(|i| std::ptr::read_volatile(slot.add(5 + i)))
            .collect();
        Some(String::from_utf8_lossy(&bytes).into_owned())
    }
}

/// Every thread's stack of `pid` from `gdb -batch` (at most 60 s, 16 KiB of
/// it), or why there is none.
pub fn stacks_of(pid: Pid) -> String {
    use std::process::{Command, Stdio};
    let child = Command::new("gdb")
        .args(["-batch", "-nx", "-p", &pid.to_string()])
        .args(["-ex", "thread apply all bt 30"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn();
    let mut child = match child {
        Ok(c) => c,
        Err(e) => return format!("(no stack: gdb did not start: {e})"),
    };
    let give_up = Instant::now() + Duration::from_secs(60);
    let clock = Clock::new();
    loop {
        match child.try_wait() {
            Ok(Some(_)) => break,
            Ok(None) if Instant::now() < give_up => {
                park_until(
                    &clock,
                    Some(clock.deadline_after(Duration::from_millis(20))),
                );
            }
            _ => {
                let _ = child.kill();
                let _ = child.wait();
                return "(no stack: gdb took over 60 s)".into();
            }
        }
    }
    let mut out = String::new();
    if let Some(mut stdout) = child.stdout.take() {
        use std::io::Read;
        let _ = stdout.read_to_string(&mut out);
    }
    let stacks: String = out
        .lines()
        .filter(|l| l.starts_with('#') || l.starts_with("Thread "))
        .collect::<Vec<_>>()
        .join("\n");
    if stacks.is_empty() {
        return "(no stack: gdb printed none)".into();
    }
    stacks.chars().take(16 * 1024).collect()
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
    stage_board();
    // SAFETY: the child only runs `f`, reports with write(2) and leaves
    // with _exit.
    match unsafe { fork() } {
        Ok(ForkResult::Child) => child_exit(f),
        Ok(ForkResult::Parent { child }) => Ok(child),
        Err(e) => Err(format!("fork failed: {e}")),
    }
}

/// The watchdog: waits for `pid`; kills it and fails once `limit` (scaled
/// by [`watchdog_scale`]) has passed, saying at which [`stage`] the child
/// was and, if `gdb` is installed, with its threads' stacks. `Ok` only for
/// an exit status of 0.
pub fn wait_child(pid: Pid, limit: Duration) -> Result<(), String> {
    let limit = scaled(limit);
    let deadline = Instant::now() + limit;
    let clock = Clock::new();
    let mut nap = Duration::from_micros(50);
    loop {
        match waitpid(pid, Some(WaitPidFlag::WNOHANG)) {
            Ok(WaitStatus::StillAlive) => {
                if Instant::now() > deadline {
                    let at = stage_of(pid).unwrap_or_else(|| "(no stage named)".into());
                    let stacks = stacks_of(pid);
                    let _ = kill(pid, Signal::SIGKILL);
                    let _ = waitpid(pid, None);
                    return Err(format!(
                        "child {pid} hung at stage \"{at}\": killed after {limit:?} \
                         (FORKSAFE_WATCHDOG_SCALE={})\n{stacks}",
                        watchdog_scale()
                    ));
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

/// Runs this test binary again as a child process, with `var` set to
/// `name` (the child runs that one case and exits), in a process group of
/// its own, its output to a temporary log. Kills the whole group (the case
/// and anything it forked) once `limit` (scaled by [`watchdog_scale`]) has
/// passed. Returns whether the case exited 0, and its log with a last line
/// saying why it failed. The `harness = false` binaries that run one case
/// per process share it.
pub fn run_isolated(var: &str, name: &str, limit: Duration) -> (bool, String) {
    use std::os::unix::process::CommandExt;
    use std::process::{Command, Stdio};
    let limit = scaled(limit);
    let exe = match std::env::current_exe() {
        Ok(exe) => exe,
        Err(e) => return (false, format!("    cannot find the test binary: {e}\n")),
    };
    let out = std::env::temp_dir().join(format!("forksafe-{}-{name}.log", std::process::id()));
    let log_file = std::fs::File::create(&out).and_then(|f| Ok((f.try_clone()?, f)));
    let (stdout, stderr) = match log_file {
        Ok(pair) => pair,
        Err(e) => return (false, format!("    cannot create {}: {e}\n", out.display())),
    };
    let mut child = match Command::new(exe)
        .env(var, name)
        .stdin(Stdio::null())
        .stdout(stdout)
        .stderr(stderr)
        .process_group(0)
        .spawn()
    {
        Ok(c) => c,
        Err(e) => return (false, format!("    cannot start: {e}\n")),
    };
    let deadline = Instant::now() + limit;
    let clock = Clock::new();
    let status = loop {
        match child.try_wait() {
            Ok(Some(s)) => break Some(s),
            Ok(None) if Instant::now() > deadline => break None,
            Ok(None) => park_until(
                &clock,
                Some(clock.deadline_after(Duration::from_millis(10))),
            ),
            Err(_) => break None,
        }
    };
    let pgid = Pid::from_raw(child.id() as i32);
    let _ = nix::sys::signal::killpg(pgid, Signal::SIGKILL);
    let _ = child.wait();
    let log = std::fs::read_to_string(&out).unwrap_or_default();
    let _ = std::fs::remove_file(&out);
    match status {
        Some(s) if s.success() => (true, log),
        Some(s) => (false, log + &format!("    {name}: exited {s}\n")),
        None => (
            false,
            log + &format!(
                "    watchdog: {name} killed after {limit:?} (hang; FORKSAFE_WATCHDOG_SCALE={})\n",
                watchdog_scale()
            ),
        ),
    }
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

    #[test]
    fn a_hung_child_is_reported_at_its_last_stage() {
        // The child only names stages and calls pause(2) until it is
        // killed: no lock libtest's vanished threads could hold.
        let hung = fork_raw(|| {
            stage("setting up");
            stage("waiting for a wake-up that never comes");
            loop {
                // SAFETY: pause(2) has no preconditions.
                unsafe { libc::pause() };
            }
        })
        .unwrap();
        let err = wait_child(hung, Duration::from_millis(300)).unwrap_err();
        assert!(
            err.contains("hung at stage \"waiting for a wake-up that never comes\""),
            "{err}"
        );
    }

    #[test]
    fn a_stage_is_cut_to_its_slot_and_read_back_whole() {
        assert!(stage_board());
        let long = "x".repeat(500);
        stage(&long);
        let me = getpid();
        assert_eq!(stage_of(me), Some("x".repeat(STAGE_TEXT)));
        stage("short");
        assert_eq!(stage_of(me).as_deref(), Some("short"));
    }
}
