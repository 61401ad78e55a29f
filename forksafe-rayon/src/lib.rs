//! `forksafe-rayon`: a rayon thread pool that survives `fork()`.
//!
//! rayon's pools do not support fork: a child inherits the pool's memory
//! but none of its threads, so the first `install` or `par_iter` in a
//! child waits for ever (rayon's maintainers say so; Rust-backed Python
//! libraries hit it under `multiprocessing`). [`ForkSafePool`] owns one
//! rayon pool per fork epoch:
//!
//! - In a fork child, the first use builds a fresh pool. The parent's —
//!   whose threads do not exist there — is never used, joined or dropped
//!   in the child (dropping it could wait for ever); see "What leaks".
//! - Before a fork, its prepare step (a forksafe fork participant,
//!   [`forksafe::join_fork`]) holds new calls and waits, bounded by
//!   [`PoolBuilder::prepare_bound`], for the calls in flight, so the child
//!   does not copy half-written results; then it waits for pool threads
//!   that are starting or leaving (a thread caught there at a fork can
//!   leave std's thread-start lock held in the child, and the child could
//!   never start a thread). If the calls do not finish in time the fork
//!   goes ahead and [`ForkSafePool::inherited`] says so in the child.
//! - [`ForkSafePool::install`], [`ForkSafePool::join`] and
//!   [`ForkSafePool::scope`] are rayon's; inside `install`, `par_iter`,
//!   `rayon::join` and `rayon::scope` run on this pool, unchanged.
//!
//! ```
//! use forksafe_rayon::ForkSafePool;
//! use rayon::prelude::*;
//!
//! let pool = ForkSafePool::builder().num_threads(2).build().unwrap();
//! let total: u64 = pool.install(|| (1..=1000u64).into_par_iter().sum());
//! assert_eq!(total, 500_500);
//! ```
//!
//! # What leaks
//!
//! Nothing in a process that does not fork, and nothing per fork in the
//! parent. In each fork child whose parent had built the pool, the
//! parent's pool object (its registry, its per-thread deques, a few KiB
//! to tens of KiB; no thread, no mapping of a thread stack: those are not
//! copied) stays allocated and unused for the child's life: one per fork
//! generation, so a chain of `n` nested forks holds `n` of them.
//! `tests/fork_leaks.rs` measures it over 10,000 forks.
//!
//! # Calls made inside a pool thread
//!
//! A call from one of this pool's own threads (a nested `install` inside a
//! job) runs directly: it is part of the call in flight that started it.
//! Forking from inside a job of this pool waits the whole prepare bound
//! for that job (which is the forking thread itself) and then goes ahead.

use forksafe::{ForkParticipant, GatedLocal, Inherited, Participation, PrepareDeadline};
use forksafe_core::global::LazySlot;
use forksafe_core::sync::{join_leaving, pause_briefly, spawn_named, Arc, Exits, Leaving};
use std::fmt;
use std::time::Duration;

/// Why a pool could not be built or joined to the fork protocol.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PoolError {
    /// rayon could not build the pool (a thread could not be started).
    Build(String),
    /// forksafe refused the participant (see [`forksafe::join_fork`]).
    Fork(forksafe::Error),
    /// A builder value out of range.
    Config(&'static str),
}

impl fmt::Display for PoolError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PoolError::Build(e) => write!(f, "building the rayon pool: {e}"),
            PoolError::Fork(e) => write!(f, "joining the fork protocol: {e}"),
            PoolError::Config(e) => write!(f, "bad pool configuration: {e}"),
        }
    }
}

impl std::error::Error for PoolError {}

/// The longest prepare bound accepted (a fork waits at most this long for
/// the pool's calls in flight).
pub const MAX_PREPARE_BOUND: Duration = Duration::from_secs(3600);

/// How a [`ForkSafePool`] is built.
#[derive(Debug, Clone)]
pub struct PoolBuilder {
    num_threads: usize,
    thread_name: String,
    stack_size: Option<usize>,
    prepare_bound: Duration,
}

impl Default for PoolBuilder {
    fn default() -> Self {
        PoolBuilder {
            num_threads: 0,
            thread_name: "forksafe-rayon".into(),
            stack_size: None,
            prepare_bound: Duration::from_secs(2),
        }
    }
}

impl PoolBuilder {
    /// Threads per pool; 0 (the default) lets rayon choose (the number of
    /// CPUs, or `RAYON_NUM_THREADS`).
    pub fn num_threads(mut self, n: usize) -> Self {
        self.num_threads = n;
        self
    }

    /// The prefix of the threads' names (`{prefix}-{index}`): no NUL byte
    /// (std cannot name a thread with one), else [`PoolError::Config`].
    pub fn thread_name(mut self, prefix: impl Into<String>) -> Self {
        self.thread_name = prefix.into();
        self
    }

    /// Each thread's stack size in bytes.
    pub fn stack_size(mut self, bytes: usize) -> Self {
        self.stack_size = Some(bytes);
        self
    }

    /// How long a fork waits for the pool's calls in flight (default
    /// 2 s; between 1 ns and [`MAX_PREPARE_BOUND`]).
    pub fn prepare_bound(mut self, bound: Duration) -> Self {
        self.prepare_bound = bound;
        self
    }

    /// Builds the pool in this process and joins it to the fork protocol.
    ///
    /// ```
    /// use forksafe_rayon::{ForkSafePool, PoolError};
    /// use std::time::Duration;
    /// let bad = ForkSafePool::builder().prepare_bound(Duration::ZERO).build();
    /// assert!(matches!(bad, Err(PoolError::Config(_))));
    /// let bad = ForkSafePool::builder().thread_name("a\0b").build();
    /// assert!(matches!(bad, Err(PoolError::Config(_))));
    /// ```
    pub fn build(self) -> Result<ForkSafePool, PoolError> {
        if self.prepare_bound.is_zero() || self.prepare_bound > MAX_PREPARE_BOUND {
            return Err(PoolError::Config(
                "prepare_bound must be positive and at most MAX_PREPARE_BOUND",
            ));
        }
        // std panics naming a thread with a NUL, on the pool's first start.
        if self.thread_name.contains('\0') {
            return Err(PoolError::Config("thread_name must not contain NUL"));
        }
        let bound = self.prepare_bound;
        let shared = Arc::new(Shared {
            config: self,
            pool: GatedLocal::new(),
        });
        let participation = forksafe::join_fork(
            Box::new(PoolParticipant {
                shared: shared.clone(),
            }),
            bound,
        )
        .map_err(PoolError::Fork)?;
        let pool = ForkSafePool {
            shared,
            participation,
        };
        // Build now, so a bad configuration fails here and not at first use.
        pool.with_pool(|_| ())?;
        Ok(pool)
    }
}

/// A rayon pool that survives `fork()` (see the crate docs).
pub struct ForkSafePool {
    shared: Arc<Shared>,
    participation: Participation,
}

impl fmt::Debug for ForkSafePool {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ForkSafePool")
            .field("threads", &self.current_num_threads())
            .field("inherited", &self.inherited())
            .finish()
    }
}

/// What the pool shares with its fork participant.
struct Shared {
    config: PoolBuilder,
    /// This process's pool, behind the gate its calls pass
    /// (`forksafe_core::GatedLocal`: built at the first use in each
    /// process, inside a pass, so a prepare step that closed the gate
    /// knows no build is spawning threads).
    pool: GatedLocal<Pool>,
}

/// One process's rayon pool and its threads. Dropped only in that process.
struct Pool {
    /// The pool's threads: counted while starting, joined when leaving.
    threads: Exits,
    /// `None` only while dropping.
    rayon: Option<rayon::ThreadPool>,
}

impl Pool {
    fn build(config: &PoolBuilder) -> Result<Pool, PoolError> {
        let threads = Exits::new();
        let prefix = config.thread_name.clone();
        let stack = config.stack_size;
        let rayon = rayon::ThreadPoolBuilder::new()
            .num_threads(config.num_threads)
            .spawn_handler(|thread| {
                let starting = threads.starting();
                let leaving = Leaving::new();
                let on_exit = leaving.clone();
                let name = format!("{prefix}-{}", thread.index());
                let handle = spawn_named(name, stack, move || {
                    drop(starting);
                    let _leaving = on_exit.on_drop();
                    thread.run();
                })?;
                threads.add(leaving, handle);
                Ok(())
            })
            .build()
            .map_err(|e| PoolError::Build(e.to_string()))?;
        Ok(Pool {
            threads,
            rayon: Some(rayon),
        })
    }

    fn rayon(&self) -> &rayon::ThreadPool {
        match &self.rayon {
            Some(p) => p,
            None => unreachable!("a Pool is emptied only by its drop"),
        }
    }

    /// Joins the threads that have left the pool's code; waits for the
    /// ones still starting. Bounded: neither runs pool work.
    fn settle_threads(&self) {
        self.threads.wait_for_starting();
        join_leaving(self.threads.take_leaving().0);
    }
}

impl Drop for Pool {
    fn drop(&mut self) {
        // Dropping the rayon pool tells its threads to finish their jobs
        // and leave; join them, so no thread is on its way out at a later
        // fork. Not from one of its own threads (it would wait for itself).
        let inside = self
            .rayon
            .as_ref()
            .is_some_and(|p| p.current_thread_index().is_some());
        drop(self.rayon.take());
        if inside {
            return;
        }
        let mut round = 0;
        loop {
            let (leaving, left) = self.threads.take_leaving();
            join_leaving(leaving);
            if left == 0 {
                return;
            }
            pause_briefly(round);
            round = round.saturating_add(1);
        }
    }
}

/// The pool's steps in the fork protocol.
struct PoolParticipant {
    shared: Arc<Shared>,
}

impl ForkParticipant for PoolParticipant {
    fn name(&self) -> &str {
        &self.shared.config.thread_name
    }

    fn prepare(&self, deadline: &PrepareDeadline<'_>) {
        self.shared.pool.prepare(deadline);
        if let Some(pool) = self.shared.pool.get() {
            pool.settle_threads();
        }
    }

    fn drain(&self, deadline: &PrepareDeadline<'_>) {
        self.shared.pool.drain(deadline);
    }

    fn at_exit(&self, deadline: &PrepareDeadline<'_>) {
        // Closed for good: a call made from now on waits (a Python thread
        // that returned into a finalised interpreter would be torn down
        // mid-call); the calls in flight get until the deadline.
        self.shared.pool.close_for_exit(deadline);
    }

    fn parent(&self) {
        self.shared.pool.parent();
    }
}

/// The process's shared pool, built with [`PoolBuilder`]'s defaults at
/// first use: the fork-safe stand-in for rayon's global pool. The slot is
/// filled with one compare-and-swap, so a fork can never copy it half
/// initialised (a `OnceLock` being filled at a fork would leave the child
/// waiting for ever).
///
/// ```
/// let pool = forksafe_rayon::global_pool().unwrap();
/// assert_eq!(pool.join(|| 1, || 2), (1, 2));
/// ```
pub fn global_pool() -> Result<&'static ForkSafePool, PoolError> {
    static GLOBAL: LazySlot<ForkSafePool> = LazySlot::new();
    GLOBAL.get_or_try_init(ForkSafePool::new)
}

impl ForkSafePool {
    /// A builder with rayon's defaults and a 2 s prepare bound.
    pub fn builder() -> PoolBuilder {
        PoolBuilder::default()
    }

    /// A pool with rayon's default number of threads.
    pub fn new() -> Result<ForkSafePool, PoolError> {
        Self::builder().build()
    }

    /// Runs `f` with this process's rayon pool, built here first if this is
    /// a fork child that has not used it yet, inside a pass of the gate a
    /// fork's prepare step closes.
    fn with_pool<R>(&self, f: impl FnOnce(&rayon::ThreadPool) -> R) -> Result<R, PoolError> {
        if let Some(pool) = self.shared.pool.get() {
            if pool.rayon().current_thread_index().is_some() {
                // Part of the call in flight that started this job.
                return Ok(f(pool.rayon()));
            }
        }
        self.shared
            .pool
            .with(|| Pool::build(&self.shared.config), |pool| f(pool.rayon()))
    }

    /// Runs `op` in the pool (rayon's `ThreadPool::install`): `par_iter`,
    /// `rayon::join` and `rayon::scope` inside it use this pool. Errors only
    /// if the pool has to be built (first use in a fork child) and cannot
    /// be (no thread can start).
    ///
    /// ```
    /// use rayon::prelude::*;
    /// let pool = forksafe_rayon::ForkSafePool::builder().num_threads(2).build().unwrap();
    /// let v: Vec<u32> = pool.try_install(|| (0..4u32).into_par_iter().map(|x| x * x).collect()).unwrap();
    /// assert_eq!(v, [0, 1, 4, 9]);
    /// ```
    pub fn try_install<OP, R>(&self, op: OP) -> Result<R, PoolError>
    where
        OP: FnOnce() -> R + Send,
        R: Send,
    {
        self.with_pool(|pool| pool.install(op))
    }

    /// [`ForkSafePool::try_install`], for code written against rayon's
    /// `install`.
    ///
    /// # Panics
    ///
    /// If the pool cannot be built in a fork child (no thread can start),
    /// as rayon's global pool does; use `try_install` to get the error.
    pub fn install<OP, R>(&self, op: OP) -> R
    where
        OP: FnOnce() -> R + Send,
        R: Send,
    {
        self.try_install(op)
            .unwrap_or_else(|e| panic!("forksafe-rayon: {e}"))
    }

    /// rayon's `ThreadPool::join` on this pool.
    ///
    /// ```
    /// let pool = forksafe_rayon::ForkSafePool::builder().num_threads(2).build().unwrap();
    /// assert_eq!(pool.join(|| 1 + 1, || "two"), (2, "two"));
    /// ```
    ///
    /// # Panics
    ///
    /// As [`ForkSafePool::install`].
    pub fn join<A, B, RA, RB>(&self, a: A, b: B) -> (RA, RB)
    where
        A: FnOnce() -> RA + Send,
        B: FnOnce() -> RB + Send,
        RA: Send,
        RB: Send,
    {
        self.install(|| rayon::join(a, b))
    }

    /// rayon's `ThreadPool::scope` on this pool.
    ///
    /// ```
    /// use std::sync::atomic::{AtomicUsize, Ordering};
    /// let pool = forksafe_rayon::ForkSafePool::builder().num_threads(2).build().unwrap();
    /// let n = AtomicUsize::new(0);
    /// pool.scope(|s| for _ in 0..3 { s.spawn(|_| { n.fetch_add(1, Ordering::Relaxed); }); });
    /// assert_eq!(n.into_inner(), 3);
    /// ```
    ///
    /// # Panics
    ///
    /// As [`ForkSafePool::install`].
    pub fn scope<'scope, OP, R>(&self, op: OP) -> R
    where
        OP: FnOnce(&rayon::Scope<'scope>) -> R + Send,
        R: Send,
    {
        self.install(|| rayon::scope(op))
    }

    /// Threads of this process's pool (0 in a fork child that has not used
    /// the pool yet).
    pub fn current_num_threads(&self) -> usize {
        self.shared
            .pool
            .get()
            .map_or(0, |p| p.rayon().current_num_threads())
    }

    /// What the fork that made this process left the pool as:
    /// [`Inherited::Unprepared`] if calls were still in flight when the
    /// prepare bound passed (their results may be half-written in this
    /// child's memory), [`Inherited::Prepared`] if not, or
    /// [`Inherited::Fresh`] if the pool was built in this process.
    pub fn inherited(&self) -> Inherited {
        self.participation.inherited()
    }
}
