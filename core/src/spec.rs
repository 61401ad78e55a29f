//! What a caller holds and names: [`Var`] handles and the [`OpSpec`] of an
//! op to push. Plain data: the engine (`engine/admission.rs`) moves a
//! spec's var list, as it is, into an op record (`op.rs`) and appends the
//! record to its vars' queues (`var.rs`).

use crate::op::{Action, OpVar, VarList};
use crate::op_info::{Lane, OpInfo, Priority};
use crate::op_name::OpName;
use crate::sync::Arc;
use std::fmt;

/// A handle naming a resource of one engine. Cheap to clone. Vars survive a
/// fork: the child's engine keeps them, with the poison of ops lost there.
pub struct Var<P> {
    state: Arc<OpVar<P>>,
}

impl<P> Clone for Var<P> {
    fn clone(&self) -> Self {
        Var {
            state: self.state.clone(),
        }
    }
}

impl<P> fmt::Debug for Var<P> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Var(engine {}, #{})", self.engine().1, self.state.id())
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
    /// The handle of a var's state.
    pub(crate) fn new(state: Arc<OpVar<P>>) -> Self {
        Var { state }
    }

    /// The var's id, unique within its engine.
    pub fn id(&self) -> u64 {
        self.state.id()
    }

    /// The owning engine: its domain and its id there.
    pub(crate) fn engine(&self) -> (usize, u64) {
        self.state.engine()
    }

    /// The var's state.
    pub(crate) fn state(&self) -> &Arc<OpVar<P>> {
        &self.state
    }

    /// The var's state, the handle given up.
    pub(crate) fn into_state(self) -> Arc<OpVar<P>> {
        self.state
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
    /// The vars the op names, reads first (`reads` of them), each with
    /// whether it writes it: the record keeps this list as it is.
    pub(crate) vars: VarList<P>,
    pub(crate) reads: usize,
    pub(crate) lane: Lane,
    pub(crate) priority: Priority,
    pub(crate) name: Option<OpName>,
    pub(crate) run_on_error: bool,
    pub(crate) action: Action,
    /// Whether the last write is a handle's var ([`OpSpec::handle_var`]),
    /// not counted against [`crate::MAX_OP_VARS`].
    pub(crate) handle: bool,
    /// Whether a push at the pending bound fails with
    /// [`crate::Error::Full`] instead of waiting for room.
    pub(crate) fail_if_full: bool,
}

impl<P> OpSpec<P> {
    /// A sync compute op of normal priority with no vars.
    pub fn new(payload: P) -> Self {
        OpSpec::empty().payload(payload)
    }

    /// A spec like [`OpSpec::new`]'s with no payload yet, for a wrapper
    /// that takes the body last and sets it with [`OpSpec::payload`].
    /// Pushing it without one is refused with [`crate::Error::NoPayload`].
    ///
    /// ```
    /// # use forksafe_core::{BodyError, CompletionToken, CoreEngine, Error, ForkDomain, OpSpec, Payload};
    /// # struct Nop;
    /// # impl Payload for Nop {
    /// #     fn run(self, _t: Option<CompletionToken<Self>>) -> Result<(), BodyError> { Ok(()) }
    /// # }
    /// # let domain: &'static ForkDomain = Box::leak(Box::new(ForkDomain::new()));
    /// # let engine = CoreEngine::<Nop>::new(domain, Default::default()).unwrap();
    /// let spec = OpSpec::empty().name("later");
    /// assert_eq!(engine.push(OpSpec::<Nop>::empty()), Err(Error::NoPayload));
    /// engine.push(spec.payload(Nop)).unwrap();
    /// ```
    pub fn empty() -> Self {
        OpSpec {
            payload: None,
            vars: VarList::new(),
            reads: 0,
            lane: Lane::Compute,
            priority: Priority::Normal,
            name: None,
            run_on_error: false,
            action: Action::Sync,
            handle: false,
            fail_if_full: false,
        }
    }

    /// The op's body (replacing one set before).
    pub fn payload(mut self, payload: P) -> Self {
        self.payload = Some(payload);
        self
    }

    /// What the op will be reported as once pushed and given `id`: its
    /// name (`"op"` if none), lane and priority.
    pub fn info(&self, id: u64) -> OpInfo {
        OpInfo {
            id,
            name: self.name.clone().unwrap_or_default().to_string(),
            lane: self.lane,
            priority: self.priority,
        }
    }

    /// The vars named so far, reads first, each with whether the op writes
    /// it (a handle's var left out).
    pub fn named_vars(&self) -> impl Iterator<Item = (Var<P>, bool)> + '_ {
        let named = self.vars.len() - usize::from(self.handle);
        self.vars[..named]
            .iter()
            .map(|(v, write)| (Var::new(v.clone()), *write))
    }

    pub(crate) fn internal(action: Action, var: &Var<P>, name: &'static str) -> Self {
        OpSpec {
            payload: None,
            vars: std::iter::once((var.state().clone(), true)).collect(),
            reads: 0,
            lane: Lane::Compute,
            priority: Priority::Normal,
            name: Some(OpName::from_static(name)),
            run_on_error: true,
            action,
            handle: false,
            fail_if_full: false,
        }
    }

    /// A push of this op at the engine's pending bound fails with
    /// [`crate::Error::Full`] instead of waiting for room (as
    /// [`crate::CoreEngine::try_push`] does for every op it pushes).
    pub fn fail_if_full(mut self) -> Self {
        self.fail_if_full = true;
        self
    }

    /// Vars the op reads.
    pub fn reads(self, vars: &[Var<P>]) -> Self {
        self.reads_vec(vars.iter().cloned())
    }
    /// Vars the op writes.
    pub fn writes(self, vars: &[Var<P>]) -> Self {
        self.writes_vec(vars.iter().cloned())
    }
    /// Vars the op reads, taken by value (no handle is cloned).
    pub fn reads_vec(mut self, vars: impl IntoIterator<Item = Var<P>>) -> Self {
        let before = self.vars.len();
        // Reads stay ahead of the writes: an op skipped for poison passes
        // on the first poison of its reads, then of its writes.
        self.vars.insert_many(
            self.reads,
            vars.into_iter().map(|v| (v.into_state(), false)),
        );
        self.reads += self.vars.len() - before;
        self
    }
    /// Vars the op writes, taken by value (no handle is cloned).
    pub fn writes_vec(mut self, vars: impl IntoIterator<Item = Var<P>>) -> Self {
        self.vars
            .extend(vars.into_iter().map(|v| (v.into_state(), true)));
        self
    }

    /// Also writes `var`, a fresh var that a handle waits on for this op's
    /// completion (its poison is the op's error): the one var an op may
    /// name beyond [`crate::MAX_OP_VARS`], so that a wrapper which adds it
    /// refuses exactly what a plain push refuses. Call it last, once.
    pub fn handle_var(mut self, var: Var<P>) -> Self {
        self.vars.push((var.into_state(), true));
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
