//! What a caller holds and names: [`Var`] handles and the [`OpSpec`] of an
//! op to push. Plain data: the engine (`engine/push.rs`) turns a spec into
//! an op record (`op.rs`) and appends it to its vars' queues (`var.rs`).

use crate::op::{Action, OpVar};
use crate::op_info::{Lane, Priority};
use crate::op_name::OpName;
use crate::sync::Arc;
use smallvec::SmallVec;
use std::fmt;

/// The vars an [`OpSpec`] reads or writes: two without an allocation.
pub(crate) type OpVars<P> = SmallVec<[Var<P>; 2]>;

/// A handle naming a resource of one engine. Cheap to clone. Vars survive a
/// fork: the child's engine keeps them, with the poison of ops lost there.
pub struct Var<P> {
    /// The owning engine: its domain and its id there.
    pub(crate) engine: (usize, u64),
    pub(crate) state: Arc<OpVar<P>>,
}

impl<P> Clone for Var<P> {
    fn clone(&self) -> Self {
        Var {
            engine: self.engine,
            state: self.state.clone(),
        }
    }
}

impl<P> fmt::Debug for Var<P> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Var(engine {}, #{})", self.engine.1, self.state.id)
    }
}

impl<P> PartialEq for Var<P> {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.state, &other.state)
    }
}
impl<P> Eq for Var<P> {}

// Hashes what `eq` compares: the var's state, by address.
impl<P> std::hash::Hash for Var<P> {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        Arc::as_ptr(&self.state).hash(state);
    }
}

impl<P> Var<P> {
    /// The var's id, unique within its engine.
    pub fn id(&self) -> u64 {
        self.state.id
    }
}

/// A request to push an op. Build with [`OpSpec::new`].
///
/// ```
/// # use forksafe_core::{BodyError, OpSpec, Lane, Priority, Payload, CompletionToken};
/// struct Nop;
/// impl Payload for Nop {
///     fn run(self, _t: Option<CompletionToken<Self>>) -> Result<(), BodyError> { Ok(()) }
/// }
/// let spec = OpSpec::new(Nop).name("nop").lane(Lane::Compute).priority(Priority::High);
/// # let _ = spec;
/// ```
pub struct OpSpec<P> {
    pub(crate) payload: Option<P>,
    pub(crate) reads: OpVars<P>,
    pub(crate) writes: OpVars<P>,
    pub(crate) lane: Lane,
    pub(crate) priority: Priority,
    pub(crate) name: Option<OpName>,
    pub(crate) run_on_error: bool,
    pub(crate) action: Action,
    /// Whether the last write is a handle's var ([`OpSpec::handle_var`]),
    /// not counted against [`crate::MAX_OP_VARS`].
    pub(crate) handle: bool,
}

impl<P> OpSpec<P> {
    /// A sync compute op of normal priority with no vars.
    pub fn new(payload: P) -> Self {
        OpSpec {
            payload: Some(payload),
            reads: OpVars::new(),
            writes: OpVars::new(),
            lane: Lane::Compute,
            priority: Priority::Normal,
            name: None,
            run_on_error: false,
            action: Action::Sync,
            handle: false,
        }
    }

    pub(crate) fn internal(action: Action, var: &Var<P>, name: &'static str) -> Self {
        OpSpec {
            payload: None,
            reads: OpVars::new(),
            writes: std::iter::once(var.clone()).collect(),
            lane: Lane::Compute,
            priority: Priority::Normal,
            name: Some(OpName::from_static(name)),
            run_on_error: true,
            action,
            handle: false,
        }
    }

    /// Vars the op reads.
    pub fn reads(mut self, vars: &[Var<P>]) -> Self {
        self.reads.extend(vars.iter().cloned());
        self
    }
    /// Vars the op writes.
    pub fn writes(mut self, vars: &[Var<P>]) -> Self {
        self.writes.extend(vars.iter().cloned());
        self
    }
    /// Vars the op reads, taken by value (no handle is cloned).
    pub fn reads_vec(mut self, vars: impl IntoIterator<Item = Var<P>>) -> Self {
        self.reads.extend(vars);
        self
    }
    /// Vars the op writes, taken by value (no handle is cloned).
    pub fn writes_vec(mut self, vars: impl IntoIterator<Item = Var<P>>) -> Self {
        self.writes.extend(vars);
        self
    }

    /// Also writes `var`, a fresh var that a handle waits on for this op's
    /// completion (its poison is the op's error): the one var an op may
    /// name beyond [`crate::MAX_OP_VARS`], so that a wrapper which adds it
    /// refuses exactly what a plain push refuses. Call it last, once.
    pub fn handle_var(mut self, var: Var<P>) -> Self {
        self.writes.push(var);
        self.handle = true;
        self
    }
    /// The lane (default compute).
    pub fn lane(mut self, lane: Lane) -> Self {
        self.lane = lane;
        self
    }
    /// The priority band (default normal).
    pub fn priority(mut self, priority: Priority) -> Self {
        self.priority = priority;
        self
    }
    /// A name for reports and errors: a string literal is kept without a
    /// copy (see [`OpName`]).
    pub fn name(mut self, name: impl Into<OpName>) -> Self {
        self.name = Some(name.into());
        self
    }
    /// Run even if a var it touches is poisoned (I7 opt-out).
    pub fn run_on_error(mut self) -> Self {
        self.run_on_error = true;
        self
    }
    /// Make it async: the body gets a [`CompletionToken`](crate::CompletionToken).
    pub fn asynchronous(mut self) -> Self {
        self.action = Action::Async;
        self
    }
}
