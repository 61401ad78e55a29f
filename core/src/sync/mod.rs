//! The synchronisation facade: the only module of forksafe that names
//! `std::sync`, `std::thread`, `thread_local!`, `loom` or `shuttle`.
//!
//! Production builds use std's futex-based primitives, which keep no
//! process-wide user-space state that a thread vanished in `fork()` could
//! have been inside (docs/DESIGN.md, "Production primitives in a fork child").
//! `--cfg loom` swaps in loom's checked primitives and `--cfg shuttle`
//! shuttle's, so the models run the code that ships.
//!
//! Time is not modelled by loom or shuttle: deadlines go through [`Clock`],
//! which in model builds is a counter that a model advances as an event.

/// Declares a function `const` in production builds only: loom's and
/// shuttle's primitives cannot be built in a const context, and production
/// statics (the fork domain) must be const-initialised so that no `Once` can
/// be half-done when the process forks.
macro_rules! const_in_production {
    ($(#[$m:meta])* $v:vis fn $name:ident($($arg:ident: $ty:ty),*) -> $ret:ty $body:block) => {
        #[cfg(not(any(loom, shuttle)))]
        $(#[$m])* $v const fn $name($($arg: $ty),*) -> $ret $body
        #[cfg(any(loom, shuttle))]
        $(#[$m])* $v fn $name($($arg: $ty),*) -> $ret $body
    };
}
pub(crate) use const_in_production;

#[cfg(all(loom, shuttle))]
compile_error!("choose one model checker: --cfg loom or --cfg shuttle, not both");

#[cfg(loom)]
use loom as imp;
#[cfg(shuttle)]
use shuttle as imp;
#[cfg(not(any(loom, shuttle)))]
use std as imp;

pub use imp::sync::atomic::{
    fence, AtomicBool, AtomicPtr, AtomicU32, AtomicU64, AtomicUsize, Ordering,
};
pub use imp::sync::Arc;
#[cfg(not(loom))]
pub use imp::thread::Thread;
pub use imp::thread::{JoinHandle, ThreadId};
#[cfg(loom)]
pub use loom_park::Thread;
/// Production builds only (the model checkers' `Arc`s have no weak
/// count): for binding state that must not keep an engine alive.
#[cfg(not(any(loom, shuttle)))]
pub use std::sync::Weak;

/// Declares a thread-local; checked by the model in model builds.
pub use imp::thread_local;

/// Model builds: a thread-local of the OS thread, which loom and shuttle do
/// not model: every thread of a model (a coroutine on the test's OS thread)
/// sees the value the test set before the model ran. For switches only
/// (the negative controls, `crate::controls`).
#[cfg(any(loom, shuttle))]
pub use std::thread_local as os_thread_local;

mod clock;
pub use clock::{Clock, Instant};

mod exits;
pub use exits::{join_leaving, Exits, Leaving, Starting};

mod take_once;
pub(crate) use take_once::TakeOnce;

mod id_cell;
pub(crate) use id_cell::IdCell;

/// True in loom and shuttle builds, where spin loops become single yields.
pub const MODEL_BUILD: bool = cfg!(any(loom, shuttle));

mod lock_order;
pub use lock_order::LockRank;
pub(crate) use lock_order::{
    is_debug_check_failure, section_closed, section_opened, without_section,
};

mod data_cell;
pub use data_cell::{DataCell, DataMut, DataRef};

mod padded;
pub use padded::CachePadded;

mod handoff;
pub use handoff::{DropFlag, DropFlagGuard, Handoff};

mod fork_watch;
#[cfg(any(loom, shuttle))]
pub use fork_watch::ForkWatched;
pub use fork_watch::{Tally, TallyGuard};

/// A mutex whose poisoning is ignored: engine state is only mutated in short
/// sections that cannot panic half-way through user code (op bodies never
/// run under an engine lock, rule H1). Each has a [`LockRank`]; debug builds
/// check that a thread takes locks in rank order (see `lock_order`). Model
/// builds also track whether it is held, for the fork-point check
/// (`fork_watch`).
#[derive(Debug, Default)]
pub struct Mutex<T> {
    inner: imp::sync::Mutex<T>,
    #[cfg(any(debug_assertions, loom, shuttle))]
    rank: LockRank,
    #[cfg(any(loom, shuttle))]
    at_fork: fork_watch::LockAtFork,
}

/// The guard of a [`Mutex`].
pub struct MutexGuard<'a, T> {
    guard: imp::sync::MutexGuard<'a, T>,
    #[cfg(all(debug_assertions, not(any(loom, shuttle))))]
    rank: LockRank,
    #[cfg(any(loom, shuttle))]
    at_fork: &'a fork_watch::LockAtFork,
}

impl<T> Mutex<T> {
    const_in_production! {
        /// A new unlocked mutex outside the lock order
        /// ([`LockRank::Unranked`]).
        pub fn new(value: T) -> Self {
            Mutex::ranked(value, LockRank::Unranked)
        }
    }

    const_in_production! {
        /// A new unlocked mutex of `rank` in the lock order.
        pub fn ranked(value: T, rank: LockRank) -> Self {
            #[cfg(not(any(debug_assertions, loom, shuttle)))]
            let _ = rank;
            Mutex {
                inner: imp::sync::Mutex::new(value),
                #[cfg(any(debug_assertions, loom, shuttle))]
                rank,
                #[cfg(any(loom, shuttle))]
                at_fork: fork_watch::LockAtFork::default(),
            }
        }
    }

    /// Locks, ignoring poison.
    pub fn lock(&self) -> MutexGuard<'_, T> {
        #[cfg(all(debug_assertions, not(any(loom, shuttle))))]
        lock_order::acquire(self.rank);
        #[cfg(any(loom, shuttle))]
        self.at_fork.before_lock(&self.rank);
        let guard = match self.inner.lock() {
            Ok(g) => g,
            Err(poisoned) => poisoned.into_inner(),
        };
        #[cfg(any(loom, shuttle))]
        self.at_fork.acquired();
        MutexGuard {
            guard,
            #[cfg(all(debug_assertions, not(any(loom, shuttle))))]
            rank: self.rank,
            #[cfg(any(loom, shuttle))]
            at_fork: &self.at_fork,
        }
    }

    /// Locks if no thread holds the lock (ignoring poison); `None` if one
    /// does. Never blocks: for code that may run where waiting is not
    /// allowed, such as a drop on whatever thread ends an object's life, or
    /// a fork child whose copy of the lock may be held by a thread it does
    /// not have (there it answers `None` for ever instead of hanging).
    pub fn try_lock(&self) -> Option<MutexGuard<'_, T>> {
        #[cfg(any(loom, shuttle))]
        if self.at_fork.is_orphaned() {
            return None;
        }
        let guard = match self.inner.try_lock() {
            Ok(g) => g,
            Err(std::sync::TryLockError::Poisoned(p)) => p.into_inner(),
            Err(std::sync::TryLockError::WouldBlock) => return None,
        };
        #[cfg(all(debug_assertions, not(any(loom, shuttle))))]
        lock_order::acquire(self.rank);
        #[cfg(any(loom, shuttle))]
        self.at_fork.acquired();
        Some(MutexGuard {
            guard,
            #[cfg(all(debug_assertions, not(any(loom, shuttle))))]
            rank: self.rank,
            #[cfg(any(loom, shuttle))]
            at_fork: &self.at_fork,
        })
    }
}

#[cfg(any(loom, shuttle))]
impl<T> ForkWatched for Mutex<T> {
    fn held_at_fork(&self) -> bool {
        // loom orders two threads' steps only where it sees them touch the
        // same object (DPOR): a plain read of the flag would never be
        // ordered against another thread's `lock`, and loom would explore
        // just one of the two orders. `try_lock` is a step on the lock
        // itself. (Shuttle schedules without that reduction, and its
        // `try_lock` is a yield point: there the flag is exact.)
        #[cfg(loom)]
        {
            matches!(
                self.inner.try_lock(),
                Err(std::sync::TryLockError::WouldBlock)
            )
        }
        #[cfg(not(loom))]
        {
            self.at_fork.is_held()
        }
    }

    fn inherit_held(&self) {
        self.at_fork.orphan();
    }
}

impl<T> std::ops::Deref for MutexGuard<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.guard
    }
}

impl<T> std::ops::DerefMut for MutexGuard<'_, T> {
    fn deref_mut(&mut self) -> &mut T {
        &mut self.guard
    }
}

#[cfg(all(debug_assertions, not(any(loom, shuttle))))]
impl<T> Drop for MutexGuard<'_, T> {
    fn drop(&mut self) {
        lock_order::release(self.rank);
    }
}

#[cfg(any(loom, shuttle))]
impl<T> Drop for MutexGuard<'_, T> {
    fn drop(&mut self) {
        // Before the field `guard` releases the lock: no model thread runs
        // in between (see `fork_watch`).
        self.at_fork.released();
    }
}

/// The calling thread's handle.
pub fn current_thread() -> Thread {
    #[cfg(loom)]
    {
        loom_park::current()
    }
    #[cfg(not(loom))]
    {
        imp::thread::current()
    }
}

/// Whether the calling thread is unwinding from a panic.
pub fn panicking() -> bool {
    std::thread::panicking()
}

/// Blocks the calling thread until unparked (may wake spuriously).
pub(crate) fn park_current() {
    #[cfg(loom)]
    loom_park::park();
    #[cfg(not(loom))]
    imp::thread::park();
}

/// loom builds: `park`/`unpark` with std's token semantics. loom 0.7.3's
/// `Thread::unpark` unblocks its target whatever the target is blocked on
/// (tokio-rs/loom#249, open PR #418): an unpark that reaches a thread blocked
/// on a mutex is lost (a later `park` blocks for ever: a false deadlock), or
/// resumes the thread while the mutex is still held (loom's "expected to be
/// able to acquire lock" panic). std keeps the token for the next `park`.
/// Here the token is an explicit flag under a loom mutex, and loom's own
/// unpark is sent only to a thread that is parked or about to park (with
/// no blocking operation in between). The flag is not an atomic: loom orders
/// concurrent stores of one atomic only partially, and can let the parker's
/// `swap` after the wake-up read its own older store instead of `true`.
#[cfg(loom)]
mod loom_park {
    use loom::sync::{Arc, Mutex};

    #[derive(Debug, Default)]
    struct Token {
        available: bool,
        parked: bool,
    }

    /// A thread handle whose unpark token survives any other blocking.
    #[derive(Clone, Debug)]
    pub struct Thread {
        inner: loom::thread::Thread,
        token: Arc<Mutex<Token>>,
    }

    impl Thread {
        /// Makes the thread's token available and wakes it if parked.
        pub fn unpark(&self) {
            let parked = {
                let mut t = self.token.lock().unwrap_or_else(|e| e.into_inner());
                t.available = true;
                t.parked
            };
            if parked {
                self.inner.unpark();
            }
        }

        /// The thread's id.
        pub fn id(&self) -> super::ThreadId {
            self.inner.id()
        }
    }

    loom::thread_local! {
        static TOKEN: Arc<Mutex<Token>> = Arc::new(Mutex::new(Token::default()));
    }

    pub(super) fn current() -> Thread {
        Thread {
            inner: loom::thread::current(),
            token: TOKEN.with(|t| t.clone()),
        }
    }

    /// Returns once the token is available, consuming it. A loom wake-up
    /// without the token (a loom-level unpark left over from a token already
    /// consumed) parks again.
    pub(super) fn park() {
        let token = TOKEN.with(|t| t.clone());
        loop {
            {
                let mut t = token.lock().unwrap_or_else(|e| e.into_inner());
                if t.available {
                    t.available = false;
                    t.parked = false;
                    return;
                }
                t.parked = true;
            }
            loom::thread::park();
        }
    }
}

/// One step of a wait for other threads' exit: [`spin_step`] at first, then
/// a short sleep in production; always a yield in model builds.
pub fn pause_briefly(round: u32) {
    #[cfg(not(any(loom, shuttle)))]
    if round >= 64 {
        imp::thread::sleep(std::time::Duration::from_micros(50));
        return;
    }
    spin_step(round);
}

/// Spawns a named thread, with `stack_size` bytes of stack if given
/// (production builds; model threads ignore it).
pub fn spawn_named<F>(
    name: String,
    stack_size: Option<usize>,
    f: F,
) -> std::io::Result<JoinHandle<()>>
where
    F: FnOnce() + Send + 'static,
{
    let builder = imp::thread::Builder::new().name(name);
    #[cfg(not(any(loom, shuttle)))]
    let builder = match stack_size {
        Some(bytes) => builder.stack_size(bytes),
        None => builder,
    };
    #[cfg(any(loom, shuttle))]
    let _ = stack_size;
    builder.spawn(f)
}

/// Blocks the calling thread until unparked (may wake spuriously) or, in
/// production builds, until `deadline` passes. Model builds never time out on
/// their own: a model fires deadlines through `Clock::advance`, which wakes
/// every timed waiter.
pub fn park_until(clock: &Clock, deadline: Option<Instant>) {
    match deadline {
        None => park_current(),
        Some(at) => clock.park_until(at),
    }
}

/// One step of a bounded spin loop: a CPU hint in production, a yield to the
/// scheduler in model builds (a spin is otherwise an infinite schedule).
pub fn spin_step(round: u32) {
    #[cfg(any(loom, shuttle))]
    {
        let _ = round;
        imp::thread::yield_now();
    }
    #[cfg(not(any(loom, shuttle)))]
    {
        if round < 64 {
            std::hint::spin_loop();
        } else {
            std::thread::yield_now();
        }
    }
}

/// This thread's shard among `n`: threads are spread round-robin, so
/// sharded counters are shared by few threads. Always 0 in model builds,
/// where every structure has one shard.
pub fn thread_shard(n: usize) -> usize {
    thread_number() % n
}

/// A small number naming the calling thread, unique in the process (given
/// out in the order threads first ask; a fork child's thread keeps its
/// parent's number). Always 0 in model builds.
pub fn thread_number() -> usize {
    #[cfg(not(any(loom, shuttle)))]
    {
        use std::cell::Cell;
        use std::sync::atomic::{AtomicUsize as StdAtomic, Ordering as StdOrdering};
        static NEXT: StdAtomic = StdAtomic::new(0);
        std::thread_local! {
            static NUMBER: Cell<usize> = const { Cell::new(usize::MAX) };
        }
        NUMBER.with(|s| {
            if s.get() == usize::MAX {
                s.set(NEXT.fetch_add(1, StdOrdering::Relaxed));
            }
            s.get()
        })
    }
    #[cfg(any(loom, shuttle))]
    {
        0
    }
}
