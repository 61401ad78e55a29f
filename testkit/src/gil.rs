//! A host lock that behaves like CPython's GIL, and a [`HostBridge`] over
//! it: the host that tests and models run the seed's scenarios against.
//! The lock is re-entrant, can be released around a wait and taken back,
//! and — like the GIL, which `os.fork()` keeps held by the forking thread —
//! is still held by the forking thread in a fork child (its owner is a
//! thread key, copied with the memory).
//!
//! # State
//!
//! The lock is free or held by one thread, `depth` times:
//!
//! | from | to | who | serves |
//! |---|---|---|---|
//! | free | held once | [`HostLock::acquire`] | one host thread at a time, as the GIL |
//! | held | held deeper, or shallower | the owner (`acquire`, `release`) | re-entrance |
//! | held | free | the owner's last `release`, or `without_host_lock` (H2) | waits release the host lock |
//! | held by a thread that is gone | free | a fork child's atfork handler (production builds) | the child can take it |
//!
//! Production builds keep the state in atomics, with no internal mutex:
//! a raw `fork()` can copy the lock at any moment, and a child must never
//! find it locked by a thread it does not have. A fork child frees a lock
//! that a thread other than the forking one held, as CPython's after-fork
//! step does for the GIL. Waiters poll with a short, growing nap. Model
//! builds keep the mutex-and-waiter-list form (no timed polling, which
//! would multiply the schedules loom and shuttle explore; their forks are
//! simulated and copy no lock).

#[cfg(not(any(loom, shuttle)))]
mod imp {
    use forksafe_core::sync::{
        park_until, thread_local, AtomicBool, AtomicPtr, AtomicU64, AtomicUsize, Clock, Ordering,
    };
    use std::cell::Cell;
    use std::time::Duration;

    /// The longest nap of a waiter between two tries.
    const MAX_NAP: Duration = Duration::from_micros(50);
    /// How many live locks a fork child can free (a lock past this is not
    /// reset in children; tests make a few).
    const SLOTS: usize = 1024;

    static NEXT_KEY: AtomicU64 = AtomicU64::new(1);
    static LIVE: [AtomicPtr<Inner>; SLOTS] =
        [const { AtomicPtr::new(std::ptr::null_mut()) }; SLOTS];

    thread_local! {
        static KEY: Cell<u64> = const { Cell::new(0) };
    }

    /// The calling thread's key: nonzero, unique in the process, and kept by
    /// the forking thread in a child (a thread-local, copied with memory).
    fn me() -> u64 {
        KEY.with(|k| {
            if k.get() == 0 {
                k.set(NEXT_KEY.fetch_add(1, Ordering::Relaxed));
            }
            k.get()
        })
    }

    #[derive(Debug)]
    struct Inner {
        /// The owner's key, 0 when free.
        owner: AtomicU64,
        /// Levels held; written by the owner only.
        depth: AtomicUsize,
        /// Threads waiting for the lock.
        waiting: AtomicUsize,
    }

    /// The lock's state; boxed, so the fork handler's pointer stays valid.
    #[derive(Debug)]
    pub(super) struct State {
        inner: Box<Inner>,
        slot: Option<usize>,
        clock: Clock,
    }

    extern "C" fn after_fork_in_child() {
        let me = me();
        for slot in LIVE.iter() {
            let p = slot.load(Ordering::Acquire);
            // SAFETY: a registered pointer is removed before its lock is
            // freed (`Drop`), and the child has only this thread.
            if let Some(inner) = unsafe { p.as_ref() } {
                if inner.owner.load(Ordering::Relaxed) != me {
                    inner.owner.store(0, Ordering::Relaxed);
                    inner.depth.store(0, Ordering::Relaxed);
                }
                inner.waiting.store(0, Ordering::Relaxed);
            }
        }
    }

    fn register(inner: &Inner) -> Option<usize> {
        static HANDLER: AtomicBool = AtomicBool::new(false);
        if !HANDLER.swap(true, Ordering::AcqRel) {
            // SAFETY: the handler only touches atomics of registered locks.
            unsafe { libc::pthread_atfork(None, None, Some(after_fork_in_child)) };
        }
        let p = inner as *const Inner as *mut Inner;
        LIVE.iter().position(|slot| {
            slot.compare_exchange(std::ptr::null_mut(), p, Ordering::AcqRel, Ordering::Relaxed)
                .is_ok()
        })
    }

    impl Drop for State {
        fn drop(&mut self) {
            if let Some(i) = self.slot {
                LIVE[i].store(std::ptr::null_mut(), Ordering::Release);
            }
        }
    }

    impl State {
        pub(super) fn new() -> Self {
            let inner = Box::new(Inner {
                owner: AtomicU64::new(0),
                depth: AtomicUsize::new(0),
                waiting: AtomicUsize::new(0),
            });
            let slot = register(&inner);
            State {
                inner,
                slot,
                clock: Clock::new(),
            }
        }

        pub(super) fn acquire(&self) {
            let (me, i) = (me(), &self.inner);
            if i.owner.load(Ordering::Acquire) == me {
                i.depth.fetch_add(1, Ordering::Relaxed);
                return;
            }
            let take = || {
                let won = i
                    .owner
                    .compare_exchange(0, me, Ordering::Acquire, Ordering::Relaxed);
                won.is_ok()
            };
            if !take() {
                // Counted as waiting from the first miss until it holds it.
                i.waiting.fetch_add(1, Ordering::Relaxed);
                let mut nap = Duration::from_micros(1);
                while !take() {
                    park_until(&self.clock, Some(self.clock.deadline_after(nap)));
                    nap = (nap * 2).min(MAX_NAP);
                }
                i.waiting.fetch_sub(1, Ordering::Relaxed);
            }
            i.depth.store(1, Ordering::Relaxed);
        }

        pub(super) fn release(&self) {
            let i = &self.inner;
            if i.owner.load(Ordering::Relaxed) != me() {
                return;
            }
            let depth = i.depth.load(Ordering::Relaxed) - 1;
            i.depth.store(depth, Ordering::Relaxed);
            if depth == 0 {
                i.owner.store(0, Ordering::Release);
            }
        }

        pub(super) fn held_by_me(&self) -> bool {
            self.inner.owner.load(Ordering::Acquire) == me()
        }

        pub(super) fn is_held(&self) -> bool {
            self.inner.owner.load(Ordering::Acquire) != 0
        }

        pub(super) fn contended(&self) -> bool {
            self.inner.waiting.load(Ordering::Relaxed) > 0
        }

        pub(super) fn release_all(&self) -> usize {
            let i = &self.inner;
            if i.owner.load(Ordering::Relaxed) != me() {
                return 0;
            }
            let depth = i.depth.swap(0, Ordering::Relaxed);
            i.owner.store(0, Ordering::Release);
            depth
        }

        pub(super) fn reacquire(&self, depth: usize) {
            if depth == 0 {
                return;
            }
            self.acquire();
            self.inner.depth.store(depth, Ordering::Relaxed);
        }
    }
}

#[cfg(any(loom, shuttle))]
mod imp {
    use forksafe_core::sync::{current_thread, park_until, Clock, Mutex, Thread, ThreadId};

    #[derive(Debug, Default)]
    struct LockState {
        owner: Option<ThreadId>,
        depth: usize,
        waiters: Vec<Thread>,
    }

    #[derive(Debug)]
    pub(super) struct State {
        state: Mutex<LockState>,
        clock: Clock,
    }

    impl State {
        pub(super) fn new() -> Self {
            State {
                state: Mutex::new(LockState::default()),
                clock: Clock::new(),
            }
        }

        pub(super) fn acquire(&self) {
            let me = current_thread();
            loop {
                {
                    let mut s = self.state.lock();
                    match s.owner {
                        None => {
                            s.owner = Some(me.id());
                            s.depth = 1;
                            return;
                        }
                        Some(o) if o == me.id() => {
                            s.depth += 1;
                            return;
                        }
                        Some(_) => s.waiters.push(me.clone()),
                    }
                }
                park_until(&self.clock, None);
            }
        }

        pub(super) fn release(&self) {
            let waiters = {
                let mut s = self.state.lock();
                if s.owner != Some(current_thread().id()) {
                    return;
                }
                s.depth -= 1;
                if s.depth > 0 {
                    return;
                }
                s.owner = None;
                std::mem::take(&mut s.waiters)
            };
            for t in waiters {
                t.unpark();
            }
        }

        pub(super) fn held_by_me(&self) -> bool {
            self.state.lock().owner == Some(current_thread().id())
        }

        pub(super) fn is_held(&self) -> bool {
            self.state.lock().owner.is_some()
        }

        pub(super) fn contended(&self) -> bool {
            !self.state.lock().waiters.is_empty()
        }

        pub(super) fn release_all(&self) -> usize {
            let (depth, waiters) = {
                let mut s = self.state.lock();
                if s.owner != Some(current_thread().id()) {
                    return 0;
                }
                let depth = s.depth;
                s.owner = None;
                s.depth = 0;
                (depth, std::mem::take(&mut s.waiters))
            };
            for t in waiters {
                t.unpark();
            }
            depth
        }

        pub(super) fn reacquire(&self, depth: usize) {
            if depth == 0 {
                return;
            }
            self.acquire();
            self.state.lock().depth = depth;
        }
    }
}

use forksafe_core::sync::{AtomicBool, AtomicUsize, Ordering};
use forksafe_core::HostBridge;

/// The GIL-like lock (the module's `# State`). Guards: at most one thread
/// holds it, at any depth.
#[derive(Debug)]
pub struct HostLock {
    state: imp::State,
}

impl Default for HostLock {
    fn default() -> Self {
        Self::new()
    }
}

impl HostLock {
    /// A free lock.
    pub fn new() -> Self {
        HostLock {
            state: imp::State::new(),
        }
    }

    /// Takes the lock (again, if this thread holds it).
    pub fn acquire(&self) {
        self.state.acquire()
    }

    /// Releases one level; the last frees it. A release by a thread that
    /// does not hold the lock is ignored.
    pub fn release(&self) {
        self.state.release()
    }

    /// Whether the calling thread holds the lock.
    pub fn held_by_me(&self) -> bool {
        self.state.held_by_me()
    }

    /// Whether some thread holds the lock.
    pub fn is_held(&self) -> bool {
        self.state.is_held()
    }

    /// Whether some other thread is waiting for the lock (a model uses this
    /// to wait until a host worker needs the lock it holds).
    pub fn contended(&self) -> bool {
        self.state.contended()
    }

    /// Releases every level this thread holds; returns how many.
    fn release_all(&self) -> usize {
        self.state.release_all()
    }

    fn reacquire(&self, depth: usize) {
        self.state.reacquire(depth)
    }
}

/// A [`HostBridge`] over a [`HostLock`], with a finalising switch and a count
/// of host calls made after finalisation began (which must stay 0, I8).
///
/// ```
/// use forksafe_testkit::GilBridge;
/// use forksafe_core::HostBridge;
/// let gil = GilBridge::new();
/// gil.lock().acquire();
/// assert!(gil.holds_host_lock());
/// gil.without_host_lock(&mut || assert!(!gil.lock().held_by_me()));
/// assert!(gil.holds_host_lock());
/// gil.lock().release();
/// ```
#[derive(Debug, Default)]
pub struct GilBridge {
    lock: HostLock,
    finalizing: AtomicBool,
    calls: AtomicUsize,
    calls_after_finalize: AtomicUsize,
    worker_starts: AtomicUsize,
    worker_exits: AtomicUsize,
    lock_on_exit: AtomicBool,
}

impl GilBridge {
    /// A bridge over a free lock.
    pub fn new() -> Self {
        Self::default()
    }

    /// The lock, for the test to hold as a host thread would.
    pub fn lock(&self) -> &HostLock {
        &self.lock
    }

    /// Starts (or stops) finalisation, as interpreter shutdown would.
    pub fn set_finalizing(&self, on: bool) {
        self.finalizing.store(on, Ordering::SeqCst);
    }

    /// Host calls made through [`HostBridge::with_host_lock`].
    pub fn calls(&self) -> usize {
        self.calls.load(Ordering::SeqCst)
    }

    /// Host calls made while finalising: the engine must make none.
    pub fn calls_after_finalize(&self) -> usize {
        self.calls_after_finalize.load(Ordering::SeqCst)
    }

    /// Makes each exiting worker take and release the lock, as CPython's
    /// bridge does to free the thread state a worker keeps.
    pub fn lock_on_worker_exit(&self, on: bool) {
        self.lock_on_exit.store(on, Ordering::SeqCst);
    }

    /// Workers that said they started ([`HostBridge::worker_started`]).
    pub fn worker_starts(&self) -> usize {
        self.worker_starts.load(Ordering::SeqCst)
    }

    /// Workers that said they are exiting ([`HostBridge::worker_exiting`]).
    pub fn worker_exits(&self) -> usize {
        self.worker_exits.load(Ordering::SeqCst)
    }
}

impl HostBridge for GilBridge {
    fn with_host_lock(&self, f: &mut dyn FnMut()) {
        self.calls.fetch_add(1, Ordering::SeqCst);
        if self.finalizing.load(Ordering::SeqCst) {
            self.calls_after_finalize.fetch_add(1, Ordering::SeqCst);
        }
        self.lock.acquire();
        f();
        self.lock.release();
    }

    fn without_host_lock(&self, f: &mut dyn FnMut()) {
        let depth = self.lock.release_all();
        f();
        self.lock.reacquire(depth);
    }

    fn holds_host_lock(&self) -> bool {
        self.lock.held_by_me()
    }

    fn is_finalizing(&self) -> bool {
        self.finalizing.load(Ordering::SeqCst)
    }

    fn worker_started(&self) {
        self.worker_starts.fetch_add(1, Ordering::SeqCst);
    }

    fn worker_exiting(&self) {
        if self.lock_on_exit.load(Ordering::SeqCst) && !self.finalizing.load(Ordering::SeqCst) {
            self.lock.acquire();
            self.lock.release();
        }
        self.worker_exits.fetch_add(1, Ordering::SeqCst);
    }
}
