//! A fork child's own copy of tokio's signal self-pipe.
//!
//! tokio delivers Unix signals through one process-wide socket pair, made
//! once (`tokio::signal::registry::globals`, private): the signal handler
//! writes a byte to the sending end, and every runtime's signal driver
//! (the IO driver, with tokio's `signal` or `process` feature) watches a
//! duplicate of the receiving end and, when it wakes, drains the socket and
//! looks at the per-process pending flags. A fork child inherits both ends
//! — the same sockets as its parent's, not copies — so once the child has a
//! runtime, the two processes' drivers drain one socket: a byte written by
//! the child's handler can be drained by the parent, whose flags show
//! nothing, and the child's `signal().recv()` (or `Child::wait`, which
//! waits for SIGCHLD) then waits for ever; the parent's signals can be lost
//! to the child the same way.
//!
//! [`detach`] gives the child a socket pair of its own under the same file
//! descriptor numbers, before the child's first runtime is built: it finds
//! the receiving end as the socket a tokio epoll instance watches under
//! tokio's signal token (`/proc/self/fdinfo`), every descriptor of that
//! socket, and the sending end as the socket made with it (the next inode:
//! `socketpair` makes both in one call), and `dup3`s a fresh pair over
//! them. Linux only; elsewhere, and when the sockets cannot be found (no
//! runtime of the parent had a signal driver), nothing changes.
//!
//! # State
//!
//! | state | moved by | serves |
//! |---|---|---|
//! | `DETACHED` < this process's epoch + 1 | the fork | the child still shares its parent's pipe |
//! | `DETACHED` = epoch + 1 | the first [`detach`] in this process, before its first runtime is built | at most once per process: a second swap would close the first runtime's watched socket |

use forksafe_core::sync::{AtomicU64, Ordering};

/// 1 + the fork epoch of the process that last detached its pipe (0: none).
static DETACHED: AtomicU64 = AtomicU64::new(0);

/// What [`detach`] did in this process.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Detached {
    /// Not a fork child, or already done in this process.
    NotNeeded,
    /// No inherited signal pipe was found (no runtime of an ancestor had a
    /// signal driver, or not Linux).
    NotFound,
    /// The pipe's descriptors now name a socket pair of this process's.
    Swapped { receivers: usize, senders: usize },
}

/// Gives this fork child its own signal self-pipe (see the module docs).
/// Call before building a runtime; at most once per process does anything.
pub(crate) fn detach() -> Result<Detached, String> {
    let epoch = forksafe::fork_epoch();
    if epoch == 0 {
        return Ok(Detached::NotNeeded);
    }
    let seen = DETACHED.load(Ordering::Acquire);
    if seen == epoch + 1
        || DETACHED
            .compare_exchange(seen, epoch + 1, Ordering::AcqRel, Ordering::Acquire)
            .is_err()
    {
        return Ok(Detached::NotNeeded);
    }
    imp::swap()
}

#[cfg(target_os = "linux")]
mod imp {
    use super::Detached;
    use std::collections::BTreeSet;

    /// tokio's token for the signal receiver in its epoll instance: 1 in
    /// the releases this crate is tested with (1.47, 1.54), `1 + (1 << 31)`
    /// in older ones.
    const SIGNAL_TOKENS: [u64; 2] = [1, 1 + (1 << 31)];

    /// The open descriptors of this process and what each names
    /// (`/proc/self/fd`).
    fn open_fds() -> Vec<(i32, String)> {
        let Ok(dir) = std::fs::read_dir("/proc/self/fd") else {
            return Vec::new();
        };
        dir.filter_map(|e| {
            let e = e.ok()?;
            let fd: i32 = e.file_name().to_str()?.parse().ok()?;
            let target = std::fs::read_link(e.path()).ok()?;
            Some((fd, target.to_string_lossy().into_owned()))
        })
        .collect()
    }

    fn socket_inode(target: &str) -> Option<u64> {
        target
            .strip_prefix("socket:[")?
            .strip_suffix(']')?
            .parse()
            .ok()
    }

    /// The inodes of the sockets an epoll instance of this process watches
    /// under tokio's signal token.
    fn signal_receivers(fds: &[(i32, String)]) -> BTreeSet<u64> {
        let mut out = BTreeSet::new();
        for (fd, target) in fds {
            if target != "anon_inode:[eventpoll]" {
                continue;
            }
            let Ok(info) = std::fs::read_to_string(format!("/proc/self/fdinfo/{fd}")) else {
                continue;
            };
            for line in info.lines().filter(|l| l.starts_with("tfd:")) {
                let mut words = line.split_whitespace();
                let mut tfd = None;
                let mut data = None;
                let mut ino = None;
                while let Some(w) = words.next() {
                    match w {
                        "tfd:" => tfd = words.next().and_then(|v| v.parse::<i32>().ok()),
                        "data:" => {
                            data = words.next().and_then(|v| u64::from_str_radix(v, 16).ok())
                        }
                        "ino:" => ino = words.next().and_then(|v| u64::from_str_radix(v, 16).ok()),
                        _ => {}
                    }
                }
                let (Some(tfd), Some(data)) = (tfd, data) else {
                    continue;
                };
                if !SIGNAL_TOKENS.contains(&data) {
                    continue;
                }
                let watched = fds
                    .iter()
                    .find(|(f, _)| *f == tfd)
                    .and_then(|(_, t)| socket_inode(t))
                    .or(ino);
                if let Some(i) = watched {
                    out.insert(i);
                }
            }
        }
        out
    }

    pub(super) fn swap() -> Result<Detached, String> {
        let fds = open_fds();
        let receivers_ino = signal_receivers(&fds);
        let Some(&receiver) = receivers_ino.iter().next() else {
            return Ok(Detached::NotFound);
        };
        if receivers_ino.len() > 1 {
            return Err(format!(
                "several sockets are watched as tokio's signal pipe: {receivers_ino:?}"
            ));
        }
        let of_inode = |ino: u64| -> Vec<i32> {
            fds.iter()
                .filter(|(_, t)| socket_inode(t) == Some(ino))
                .map(|(f, _)| *f)
                .collect()
        };
        let receivers = of_inode(receiver);
        let senders = of_inode(receiver + 1);
        if senders.is_empty() {
            return Err(format!(
                "the sending end of tokio's signal pipe (socket inode {}) is not open",
                receiver + 1
            ));
        }
        let mut pair = [0i32; 2];
        // SAFETY: socketpair writes two descriptors into `pair`, which has
        // room for two.
        let rc = unsafe {
            libc::socketpair(
                libc::AF_UNIX,
                libc::SOCK_STREAM | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
                0,
                pair.as_mut_ptr(),
            )
        };
        if rc != 0 {
            return Err(format!("socketpair: {}", std::io::Error::last_os_error()));
        }
        let mut result = Ok(());
        for (fresh, targets) in [(pair[0], &receivers), (pair[1], &senders)] {
            for &fd in targets {
                // SAFETY: `fresh` is a descriptor this call opened and `fd`
                // one of this process's, named by tokio's private statics:
                // dup3 makes `fd` name `fresh`'s socket (closing its old
                // one in this process only; the parent keeps its own).
                if unsafe { libc::dup3(fresh, fd, libc::O_CLOEXEC) } < 0 {
                    result = Err(format!(
                        "dup3 onto {fd}: {}",
                        std::io::Error::last_os_error()
                    ));
                }
            }
        }
        for fd in pair {
            // SAFETY: closes the two descriptors this call opened; their
            // sockets stay open under the duplicated numbers.
            unsafe { libc::close(fd) };
        }
        result.map(|()| Detached::Swapped {
            receivers: receivers.len(),
            senders: senders.len(),
        })
    }
}

#[cfg(not(target_os = "linux"))]
mod imp {
    use super::Detached;

    pub(super) fn swap() -> Result<Detached, String> {
        Ok(Detached::NotFound)
    }
}
