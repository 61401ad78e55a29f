//! A host lock that behaves like CPython's GIL, and a [`HostBridge`] over
//! it: the host that tests and models run the seed's scenarios against.
//! The lock is re-entrant, can be released around a wait and taken back,
//! and — like the GIL, which `os.fork()` keeps held by the forking thread —
//! is still held by the forking thread in a fork child (its owner is a
//! thread id, copied with the memory).

use forksafe_core::sync::{
    current_thread, park_until, AtomicBool, AtomicUsize, Clock, Mutex, Ordering, Thread, ThreadId,
};
use forksafe_core::HostBridge;

/// The GIL-like lock. Waiting threads park; a release wakes them.
#[derive(Debug)]
pub struct HostLock {
    state: Mutex<LockState>,
    clock: Clock,
}

#[derive(Debug, Default)]
struct LockState {
    owner: Option<ThreadId>,
    depth: usize,
    waiters: Vec<Thread>,
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
            state: Mutex::new(LockState::default()),
            clock: Clock::new(),
        }
    }

    /// Takes the lock (again, if this thread holds it).
    pub fn acquire(&self) {
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

    /// Releases one level; the last wakes the waiters. A release by a thread
    /// that does not hold the lock is ignored.
    pub fn release(&self) {
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

    /// Whether the calling thread holds the lock.
    pub fn held_by_me(&self) -> bool {
        self.state.lock().owner == Some(current_thread().id())
    }

    /// Whether some thread holds the lock.
    pub fn is_held(&self) -> bool {
        self.state.lock().owner.is_some()
    }

    /// Whether some other thread is blocked waiting for the lock (a model
    /// uses this to wait until a host worker needs the lock it holds).
    pub fn contended(&self) -> bool {
        !self.state.lock().waiters.is_empty()
    }

    /// Releases every level this thread holds; returns how many.
    fn release_all(&self) -> usize {
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

    fn reacquire(&self, depth: usize) {
        if depth == 0 {
            return;
        }
        self.acquire();
        self.state.lock().depth = depth;
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
}
