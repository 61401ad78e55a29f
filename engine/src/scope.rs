//! Scoped ops: `engine.scope(|s| ...)`, like `std::thread::scope` and
//! `rayon::scope`. Ops pushed on the scope may borrow from the caller's
//! stack; the scope returns only once every one of them has completed and
//! its payload is gone, errors included.
//!
//! Why borrowing is sound: a scoped op's body is boxed with the scope's
//! lifetime and handed to the engine as `'static`; nothing may use it after
//! the scope returns. [`Engine::scope`] therefore waits, unconditionally
//! (an interrupted wait waits again), for two things per op:
//!
//! 1. its completion (a hidden var the op writes, as [`crate::OpHandle`]s
//!    use), and
//! 2. its payload being gone: a body that ran is consumed before its op
//!    completes, and a skipped op's payload is dropped before, but a
//!    payload cancelled by shutdown, or failed for want of a worker, is
//!    dropped just after; a [`DropFlag`] set by the payload's last drop
//!    covers both.
//!
//! The one payload never dropped is that of an op lost in a fork child: the
//! child completes it with `LostInFork` and leaks its payload, so it can
//! never touch the borrowed data; the scope then waits only for 1.
//!
//! # Fork inside a scope
//!
//! A fork (raw or [`crate::fork`]) from inside the scope's closure copies
//! the scope with its thread. In the child, every scoped op that had not
//! completed at the fork is completed with `LostInFork` without running,
//! the scope waits for nothing else, and it returns
//! [`Error::OpsFailed`] with those errors; the parent's scope is not
//! affected. An op cancelled by shutdown is reported the same way, with
//! [`OpErrorKind::Cancelled`]. A scope cannot be opened from inside an op of the same engine
//! ([`Error::ScopeInsideOp`]): its ops could depend on the calling op,
//! which cannot complete before the scope returns.

use crate::{Access, Engine, Lane, OpId, OpInfo, OpName, Priority, Result, Var};
use forksafe_core::sync::{pause_briefly, DropFlag, DropFlagGuard};
use forksafe_core::{Error, OpError, OpErrorKind};
use std::cell::RefCell;
use std::marker::PhantomData;

/// A scope's body, with the scope's lifetime.
type ScopedBody<'scope> = Box<dyn FnOnce(&Access) + Send + 'scope>;

/// The ops a [`Scope`] pushed: their ids, the hidden var each writes, and
/// the flag its payload's drop sets.
struct Pushed {
    info: OpInfo,
    done: Var,
    gone: DropFlag,
    /// Set as the body starts: an op that completed without it set was
    /// cancelled (shutdown).
    ran: DropFlag,
}

/// A scope of ops that may borrow from the caller (see [`Engine::scope`]).
///
/// An op may borrow only what outlives the scope, not a local of the
/// scope's closure:
///
/// ```compile_fail,E0373
/// # let engine = forksafe::Engine::new(Default::default()).unwrap();
/// engine.scope(|s| {
///     let local = vec![1];
///     s.op("borrow").run(|_| drop(local.len())).unwrap(); // error: may outlive `local`
/// }).unwrap();
/// ```
pub struct Scope<'scope, 'env: 'scope> {
    engine: &'env Engine,
    pushed: RefCell<Vec<Pushed>>,
    /// Invariant in `'scope`, as `std::thread::Scope`.
    _scope: PhantomData<&'scope mut &'scope ()>,
    _env: PhantomData<&'env mut &'env ()>,
}

impl std::fmt::Debug for Scope<'_, '_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Scope({} ops)", self.pushed.borrow().len())
    }
}

/// An op being built on a [`Scope`]; finish it with [`ScopedOp::run`].
#[must_use = "an op is pushed only by run"]
pub struct ScopedOp<'scope, 'env> {
    scope: &'scope Scope<'scope, 'env>,
    builder: crate::OpBuilder<'env>,
}

impl std::fmt::Debug for ScopedOp<'_, '_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.builder.fmt(f)
    }
}

/// The payload wrapper: the body first, then the flag, so the flag is set
/// only once the body (and whatever it captured) is gone.
struct Payload {
    body: Option<ScopedBody<'static>>,
    _gone: DropFlagGuard,
}

impl Engine {
    /// Runs `f` with a [`Scope`] on which ops may borrow from the caller's
    /// stack, and returns once every op pushed on it has completed (with
    /// the host lock released while it waits). Returns `f`'s value, or
    /// [`Error::OpsFailed`] with the errors the scope's ops completed with;
    /// a panic in `f` is resumed after the wait.
    ///
    /// ```
    /// # let engine = forksafe::Engine::new(Default::default()).unwrap();
    /// let xs = vec![1, 2, 3, 4];
    /// let (mut left, mut right) = (0, 0);
    /// engine.scope(|s| {
    ///     s.op("left").run(|_| left = xs[..2].iter().sum()).unwrap();
    ///     s.op("right").run(|_| right = xs[2..].iter().sum()).unwrap();
    /// }).unwrap();
    /// assert_eq!((left, right), (3, 7));
    /// ```
    pub fn scope<'env, F, R>(&'env self, f: F) -> Result<R>
    where
        F: for<'scope> FnOnce(&'scope Scope<'scope, 'env>) -> R,
    {
        if self.is_inside_op() {
            return Err(Error::ScopeInsideOp);
        }
        let scope = Scope {
            engine: self,
            pushed: RefCell::new(Vec::new()),
            _scope: PhantomData,
            _env: PhantomData,
        };
        let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| f(&scope)));
        let errors = scope.wait_for_all();
        match result {
            Err(panic) => std::panic::resume_unwind(panic),
            Ok(_) if !errors.is_empty() => Err(Error::OpsFailed(errors)),
            Ok(r) => Ok(r),
        }
    }
}

impl<'scope, 'env> Scope<'scope, 'env> {
    /// Starts building an op on this scope (see [`crate::OpBuilder`] for
    /// the settings).
    pub fn op(&'scope self, name: impl Into<OpName>) -> ScopedOp<'scope, 'env> {
        ScopedOp {
            scope: self,
            builder: self.engine.op(name),
        }
    }

    /// Waits until every pushed op has completed and its payload is gone;
    /// returns the errors they completed with. Never returns earlier.
    fn wait_for_all(&self) -> Vec<forksafe_core::OpError> {
        let mut errors = Vec::new();
        for p in self.pushed.borrow().iter() {
            let mut round = 0;
            let outcome = loop {
                match self.engine.wait_for_var(&p.done) {
                    Ok(()) => break None,
                    Err(Error::Poisoned(e)) => break Some(e),
                    // Interrupted by the host, or any other refusal: the op
                    // may still run, so wait again.
                    Err(_) => {
                        pause_briefly(round);
                        round = round.saturating_add(1);
                    }
                }
            };
            // Lost in a fork child: completed unrun, its payload leaked
            // (never dropped, so never touching the borrows).
            let leaked = outcome
                .as_ref()
                .is_some_and(|e| e.op().id == p.info.id && e.kind() == &OpErrorKind::LostInFork);
            let mut round = 0;
            while !leaked && !p.gone.is_set() {
                // Bounded: the cancel and no-worker paths drop a payload
                // right after completing its op.
                pause_briefly(round);
                round = round.saturating_add(1);
            }
            // Completed cleanly without running: cancelled by shutdown.
            let outcome = outcome.or_else(|| {
                (!p.ran.is_set()).then(|| OpError::new(p.info.clone(), OpErrorKind::Cancelled))
            });
            errors.extend(outcome);
        }
        errors
    }
}

impl<'scope, 'env> ScopedOp<'scope, 'env> {
    /// Vars the op reads.
    pub fn reads(mut self, vars: &[&Var]) -> Self {
        self.builder = self.builder.reads(vars);
        self
    }

    /// Vars the op writes.
    pub fn writes(mut self, vars: &[&Var]) -> Self {
        self.builder = self.builder.writes(vars);
        self
    }

    /// The lane (default [`Lane::Compute`]).
    pub fn lane(mut self, lane: Lane) -> Self {
        self.builder = self.builder.lane(lane);
        self
    }

    /// Runs the op on the host lane.
    pub fn host(self) -> Self {
        self.lane(Lane::Host)
    }

    /// The priority band.
    pub fn priority(mut self, priority: Priority) -> Self {
        self.builder = self.builder.priority(priority);
        self
    }

    /// Pushes the op; its body may borrow anything that outlives the
    /// scope, and gets the op's [`Access`] to data vars. A panic fails the
    /// op (and poisons what it writes); the scope reports it.
    pub fn run(self, body: impl FnOnce(&Access) + Send + 'scope) -> Result<OpId> {
        let boxed: ScopedBody<'scope> = Box::new(body);
        // SAFETY: only the lifetime changes. The scope does not return
        // before this op has completed and this payload is gone (or was
        // leaked by a fork child, which never runs or drops it):
        // `Scope::wait_for_all`, called by `Engine::scope` on every path,
        // panics included. So the body never runs, and is never dropped,
        // after `'scope` ends.
        let body: ScopedBody<'static> = unsafe { std::mem::transmute(boxed) };
        let (gone, ran) = (DropFlag::new(), DropFlag::new());
        let started = ran.clone();
        let mut payload = Payload {
            body: Some(body),
            _gone: gone.guard(),
        };
        let described = self.builder.spec().info(0);
        let (id, done) = self.builder.push_accessing(move |access| {
            if let Some(body) = payload.body.take() {
                drop(started.guard());
                body(access);
            }
            Ok(())
        })?;
        let info = OpInfo { id, ..described };
        self.scope.pushed.borrow_mut().push(Pushed {
            info,
            done,
            gone,
            ran,
        });
        Ok(id)
    }
}
