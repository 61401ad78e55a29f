//! Admission, the first step of an op's path: a push's checks, the pending
//! bound, and the append to every var's queue in one step, so that push
//! order is the same on every var (I1). An op granted every var here goes
//! on to its lane's ready queues (`dispatch.rs`).
//!
//! # State
//!
//! Admission moves, in this order, the parts it reaches: a place under the
//! pending bound (`bound.rs`), each var's queue (`var.rs`, under all of the
//! op's var locks at once, in var-id order), the op's id (`ids.rs`, taken
//! under those locks), the live set (`live.rs`), the op's grants (`op.rs`).
//!
//! | step | moves | serves |
//! |---|---|---|
//! | reserve | a place under the bound, waiting for room unless inside an op | the bound rule (docs/DESIGN.md): a push from inside an op never waits, its own op may hold the last place |
//! | lock and check | every var lock, in var-id order; a deleted var refuses | I1: two pushes sharing vars are ordered alike on all of them |
//! | number | the next op id, under those locks | I1: "pushed before" is "id below" on every var |
//! | list | the op in the live set, before the state check | I2, I8: a shutdown's sweep sees it or it sees the shutdown |
//! | append | a use on each var's queue; the grants of the free ones and the pusher's own, in one step | I1; the op runs only once it is on every queue |
//! | hand on | a ready op to `dispatch.rs` | — |
//!
//! A push refused after its reserve gives its place back (`complete.rs`,
//! [`complete::give_back_place`]).

use super::complete::{self, Outcome, Which};
use super::dispatch::{dispatch, PushSide};
use super::shared::Shared;
use super::Payload;
use super::{finish, run, spawn, CoreEngine};
use crate::error::{Error, Result};
use crate::fork_gate::Section;
use crate::op::{Action, OpCell, MAX_OP_VARS};
use crate::op_info::Lane;
use crate::pool::Spawns;
use crate::spec::{OpSpec, Var};
use crate::sync::{current_thread, Arc, MutexGuard, Thread};
use crate::var::VarInner;
use smallvec::SmallVec;
use std::time::Duration;

impl<P: Payload> CoreEngine<P> {
    /// Pushes an op; returns its id. With a pending bound, waits for room
    /// with the host lock released (H2), except when called from inside an
    /// op of this engine: the calling op holds a place that only its own
    /// completion frees, so such a push never waits and returns
    /// [`Error::Full`] at once when the bound is reached (the bound rule,
    /// docs/DESIGN.md). Bad input is a typed error and nothing already
    /// accepted is affected.
    ///
    /// An op is accepted even if its lane has no worker left and none can
    /// start (a fork child whose OS refuses threads): it then completes at
    /// once with [`crate::OpErrorKind::WorkerStart`], reported by waits.
    pub fn push(&self, spec: OpSpec<P>) -> Result<u64> {
        push(&self.shared, spec, true)
    }

    /// Pushes an op, or returns [`Error::Full`] at once if the pending bound
    /// is reached.
    pub fn try_push(&self, spec: OpSpec<P>) -> Result<u64> {
        push(&self.shared, spec, false)
    }

    /// Pushes `specs` in order, each as [`CoreEngine::push`] would, and
    /// returns each one's result in that order: a refused spec is an
    /// error in its place and the others go on. Cheaper per op than
    /// single pushes: the ops share one fork-gate section, and the ready
    /// ones are queued in runs that share each ready queue's lock and
    /// the wake-ups. The batch leaves its section to wait for a place
    /// under the pending bound (then the ops it holds are queued first)
    /// and to run an op inline.
    ///
    /// ```
    /// use forksafe_core::{BodyError, CompletionToken, CoreEngine, ForkDomain, OpSpec, Payload};
    /// struct Nop;
    /// impl Payload for Nop {
    ///     fn run(self, _t: Option<CompletionToken<Self>>) -> Result<(), BodyError> { Ok(()) }
    /// }
    /// let domain: &'static ForkDomain = Box::leak(Box::new(ForkDomain::new()));
    /// let engine = CoreEngine::<Nop>::new(domain, Default::default()).unwrap();
    /// let v = engine.new_var().unwrap();
    /// let ids = engine.push_batch((0..100).map(|_| OpSpec::new(Nop).writes(&[v.clone()])));
    /// assert!(ids.iter().all(Result::is_ok));
    /// engine.wait_for_var(&v).unwrap();
    /// assert_eq!(engine.var_version(&v).unwrap(), 100);
    /// ```
    pub fn push_batch(&self, specs: impl IntoIterator<Item = OpSpec<P>>) -> Vec<Result<u64>> {
        push_batch(&self.shared, specs)
    }

    /// The checks [`CoreEngine::push`] makes before it accepts `spec`, made
    /// without pushing it: [`Error::ForeignVar`], [`Error::NoPayload`],
    /// [`Error::TooManyVars`], [`Error::DuplicateVar`], and
    /// [`Error::ShutDown`] once the engine refuses pushes. A spec that
    /// passes may still be refused by the push itself (a var deleted or a
    /// shutdown begun meanwhile, the pending bound); a wrapper that
    /// builds a batch checks each spec with this first, so that bad input
    /// pushes nothing.
    ///
    /// ```
    /// use forksafe_core::{BodyError, CompletionToken, CoreEngine, Error, ForkDomain, OpSpec, Payload};
    /// struct Nop;
    /// impl Payload for Nop {
    ///     fn run(self, _t: Option<CompletionToken<Self>>) -> Result<(), BodyError> { Ok(()) }
    /// }
    /// let domain: &'static ForkDomain = Box::leak(Box::new(ForkDomain::new()));
    /// let engine = CoreEngine::<Nop>::new(domain, Default::default()).unwrap();
    /// let v = engine.new_var().unwrap();
    /// let twice = OpSpec::new(Nop).reads(&[v.clone()]).writes(&[v.clone()]);
    /// assert_eq!(engine.check(&twice), Err(Error::DuplicateVar));
    /// assert_eq!(engine.check(&OpSpec::new(Nop).writes(&[v])), Ok(()));
    /// ```
    pub fn check(&self, spec: &OpSpec<P>) -> Result<()> {
        check(&self.shared, spec).map(drop)
    }

    /// Deletes `var` once every op pushed on it so far has completed
    /// (deferred deletion). Later pushes naming it get
    /// [`Error::DeletedVar`].
    pub fn delete_var(&self, var: &Var<P>) -> Result<u64> {
        push(
            &self.shared,
            OpSpec::internal(Action::Delete, var, "delete_var"),
            true,
        )
    }

    /// Clears the var's poison (I7): an op ordered on the var like any other.
    pub fn clear_poison(&self, var: &Var<P>) -> Result<u64> {
        push(
            &self.shared,
            OpSpec::internal(Action::ClearPoison, var, "clear_poison"),
            true,
        )
    }
}

/// Pushes `spec`. A refused push drops its payload on the caller's
/// thread once every engine lock is released (H1), without taking the
/// host lock: taking it there would be a host call the engine makes
/// after a shutdown has returned (I8; the shuttle model
/// `i8_shutdown_random` catches that variant).
#[inline]
pub(crate) fn push<P: Payload>(this: &Arc<Shared<P>>, spec: OpSpec<P>, block: bool) -> Result<u64> {
    let mut admission = Admission::new(this);
    let id = admission.push(spec, block);
    admission.finish();
    id
}

/// Pushes `specs` in order, each as [`push`] would, under as few sections
/// as the pending bound allows; each one's result, in order.
pub(crate) fn push_batch<P: Payload>(
    this: &Arc<Shared<P>>,
    specs: impl IntoIterator<Item = OpSpec<P>>,
) -> Vec<Result<u64>> {
    let mut admission = Admission::new(this);
    let ids = specs
        .into_iter()
        .map(|spec| admission.push(spec, true))
        .collect();
    admission.finish();
    ids
}

/// The checks of a push before it takes a place: the spec's vars are this
/// engine's, it has a payload if it runs one, its vars fit and are named
/// once (their lock order returned), and the engine takes pushes.
fn check<P: Payload>(this: &Shared<P>, spec: &OpSpec<P>) -> Result<SmallVec<[u32; 4]>> {
    let key = this.key();
    if spec.vars.iter().any(|(v, _)| v.engine() != key) {
        return Err(Error::ForeignVar);
    }
    if spec.payload.is_none() && matches!(spec.action, Action::Sync | Action::Async) {
        return Err(Error::NoPayload);
    }
    let order = lock_order(spec)?;
    if this.state().refuses_pushes() {
        return Err(Error::ShutDown);
    }
    Ok(order)
}

/// Ready ops a batch push holds before it queues them: enough that the
/// queue locks and wake-ups are shared by many ops, few enough that the
/// workers start on a long batch soon.
const READY_RUN: usize = 32;

/// Ops a batch push accepts under one section before it flushes: a fork's
/// prepare, which waits for open sections, waits for at most this many
/// accepts.
const SECTION_RUN: usize = 256;

/// One push, or a batch of them from one thread, under one section
/// (the module's `# State` lists the steps of each push).
///
/// # State
///
/// | what | move | who | serves |
/// |---|---|---|---|
/// | `section` | none → held | the first accept, and the first after a flush | I4, I5: a fork waits for the section, so the epoch a record is built in does not move under it |
/// | `section` | held → none | a flush: the batch's end, [`SECTION_RUN`] accepts, a wait for a place under the bound, an op to run inline | H2: no wait and no body inside a section; a fork waits for a bounded run of accepts |
/// | `ready` | ops made ready → queued | a flush, or once [`READY_RUN`] are held (at once for a pusher that may run ops inline) | I1: an op is queued only once it is on every var's queue |
/// | `refused` (made at the first refusal), the pusher's freed records | filled → dropped or woken | a flush, after the section | H1: no payload dropped, no thread woken, inside a section |
/// | `inline` | none → an op → run | a dispatch that took it → the flush that follows it at once | docs/DESIGN.md "Running inline" |
struct Admission<'a, P: Payload> {
    shared: &'a Arc<Shared<P>>,
    section: Option<Section<'a>>,
    /// Pushes accepted under the current section.
    in_section: usize,
    ready: SmallVec<[Arc<OpCell<P>>; 1]>,
    pusher: PushSide<P>,
    spawns: Spawns,
    inline: Option<Arc<OpCell<P>>>,
    /// What refused pushes leave for the flush; made at the first refusal
    /// (the push path that refuses nothing builds and drops none of it).
    refused: Option<Box<Refused<P>>>,
}

/// What refused pushes leave for the flush, which drops or wakes it once
/// the section has ended (H1).
struct Refused<P> {
    /// Waiters woken by a refused op's leaving the live set.
    wake: Vec<Thread>,
    /// Records of pushes refused for a deleted var, not in the live set.
    records: Vec<Arc<OpCell<P>>>,
    /// Payloads of pushes refused by a shutdown that began meanwhile.
    payloads: Vec<P>,
}

impl<'a, P: Payload> Admission<'a, P> {
    #[inline]
    fn new(shared: &'a Arc<Shared<P>>) -> Self {
        Admission {
            shared,
            section: None,
            in_section: 0,
            ready: SmallVec::new(),
            pusher: PushSide::new(inline_from(shared)),
            spawns: Spawns::new(),
            inline: None,
            refused: None,
        }
    }

    #[cold]
    fn refused(&mut self) -> &mut Refused<P> {
        self.refused.get_or_insert_with(|| {
            Box::new(Refused {
                wake: Vec::new(),
                records: Vec::new(),
                payloads: Vec::new(),
            })
        })
    }

    /// One push: its checks, a place under the bound, the accept.
    #[inline]
    fn push(&mut self, spec: OpSpec<P>, block: bool) -> Result<u64> {
        let this = self.shared;
        let order = check(this, &spec)?;
        control!(PushWaitsForQuiesce => crate::controls::wait_for_resume(this));
        self.reserve(block && !spec.fail_if_full)?;
        let accepted = self.accept(spec, &order);
        if accepted.is_err() {
            if self.section.is_some() {
                complete::give_back_place(this);
            } else {
                match this.enter() {
                    Ok(_section) => complete::give_back_place(this),
                    Err(_) => {
                        this.bound().release();
                    }
                }
            }
        }
        if self.inline.is_some() || self.in_section >= SECTION_RUN {
            self.flush();
        }
        accepted
    }

    /// A place under the pending bound. With none free, flushes first:
    /// the ops this admission holds may be what frees one, and the wait
    /// happens outside every section.
    #[inline]
    fn reserve(&mut self, block: bool) -> Result<()> {
        let bound = self.shared.bound();
        match bound.max() {
            None => Ok(()),
            Some(max) if bound.try_reserve(max) => Ok(()),
            Some(_) => {
                self.flush();
                reserve(self.shared, block)
            }
        }
    }

    /// Appends the op to its vars' queues, holding every var lock in id
    /// order (`order`: positions in the op's var list) so two pushes
    /// sharing vars are ordered alike on all of them.
    #[inline]
    fn accept(&mut self, spec: OpSpec<P>, order: &[u32]) -> Result<u64> {
        let this = self.shared;
        let OpSpec {
            payload,
            vars,
            reads: _,
            lane,
            priority,
            name,
            run_on_error,
            action,
            handle: _,
            fail_if_full: _,
        } = spec;
        // `lock_order` allows at most MAX_OP_VARS vars, so this fits.
        let missing = order.len() as u32 + 1;
        // The section first: in a fork child it settles the engine, which
        // moves the epoch the record is built in.
        if self.section.is_none() {
            self.section = Some(this.enter()?);
        }
        self.in_section += 1;
        // The record is built before its id is known and numbered under
        // the var locks, so the locks borrow the vars from the record
        // itself: the spec's list moves in as it is.
        let op = Arc::new(OpCell::new(
            0,
            this.epoch().get(),
            name.unwrap_or_default(),
            lane,
            priority,
            action,
            run_on_error,
            vars,
            missing,
            payload,
        ));
        let mut guards: SmallVec<[LockedVar<'_, P>; 4]> = SmallVec::new();
        for &i in order {
            let (var, write) = op.var(i as usize);
            let g = var.lock();
            if g.is_deleted() {
                drop(g);
                drop(guards);
                // The refused payload is host code: dropped with the
                // record at the flush, after the section (H1).
                self.refused().records.push(op);
                return Err(Error::DeletedVar);
            }
            guards.push((g, write));
        }
        op.set_id(this.ids().next_op_id());
        let id = op.id();
        // In the live index before the state check: shutdown sets its
        // state before it sweeps the index, so either its sweep sees this
        // op or this check sees the shutdown (both go through the shard
        // lock).
        this.live().insert(op.clone());
        if this.state().refuses_pushes() && op.try_cancel() {
            // SAFETY: this thread just cancelled the op (moved it out of
            // `Queued`), so nothing else takes its payload.
            let refused = unsafe { op.take_payload() };
            // A waiter may have seen the op in the index meanwhile.
            let left = self.refused();
            complete::leave_live(this, &op, &mut left.wake);
            // Host code, dropped at the flush outside every engine lock
            // (H1): the index keeps the op's record until it is trimmed.
            left.payloads.extend(refused);
            drop(guards);
            return Err(Error::ShutDown);
        }
        // Otherwise accepted (perhaps already cancelled by the sweep,
        // which waits for these var locks before it releases the op's
        // uses).
        let mut granted = 0;
        for (g, write) in guards.iter_mut() {
            if action == Action::Delete {
                g.mark_deleted();
            }
            granted += u32::from(g.append(&op, *write));
        }
        drop(guards);
        // The grants of the vars that were free, with the pusher's own,
        // in one step: the op may run only once it is on every var's
        // queue and in the live index. Until this step no other grant can
        // bring the count to zero (the pusher's own is still missing), so
        // applying the append grants here rather than under the var locks
        // changes nothing another thread can see.
        if op.grant_many(granted + 1) {
            self.ready.push(op);
            // A pusher that may run ops inline hands each ready op on at
            // once: it gets the inline decision a single push gives it.
            if self.ready.len() >= READY_RUN || self.pusher.may_run_inline() {
                self.dispatch_ready();
            }
        }
        Ok(id)
    }

    /// Queues the ready ops, sorted by ready queue so that each queue's
    /// lock is taken once for its run (`dispatch.rs`); inside the section.
    #[inline]
    fn dispatch_ready(&mut self) {
        if self.ready.is_empty() {
            return;
        }
        let shared = self.shared;
        if self.ready.len() > 1 {
            self.ready.sort_by_key(|op| {
                let queue = shared.ready(op.lane).queue_for(op.id());
                (op.lane == Lane::Host, queue)
            });
        }
        let ops = self.ready.drain(..);
        let taken = dispatch(shared, ops, None, &mut self.spawns, Some(&mut self.pusher));
        if taken.is_some() {
            self.inline = taken;
        }
    }

    /// Queues what is ready, leaves the section, then does what must
    /// happen outside it: frees the records the workers handed back (on
    /// this thread, which allocated them), drops refused payloads (H1),
    /// wakes waiters, starts planned workers, runs an op taken inline.
    #[inline]
    fn flush(&mut self) {
        self.dispatch_ready();
        self.section = None;
        self.in_section = 0;
        self.pusher.free_handed_back();
        if let Some(refused) = self.refused.take() {
            for t in &refused.wake {
                t.unpark();
            }
            drop(refused);
        }
        // Accepted ops: a start failure that strands one fails it with
        // `WorkerStart`, reported at waits like any op error.
        let _ = spawn::start_workers(self.shared, std::mem::take(&mut self.spawns));
        if let Some(op) = self.inline.take() {
            // Outside the section: a body may fork, wait or take any time.
            run_inline(self.shared, &op);
        }
    }

    /// The end of the push or the batch: a last flush.
    #[inline]
    fn finish(mut self) {
        self.flush();
    }
}

/// One of a push's var locks, held, with whether the op writes the var.
type LockedVar<'a, P> = (MutexGuard<'a, VarInner<OpCell<P>>>, bool);

/// Runs an op its pusher took to run inline (`dispatch.rs`,
/// docs/DESIGN.md "Running inline") on the pushing thread, outside
/// every section, and completes it as a worker would. The ops its
/// completion makes ready are queued for the workers: the pusher goes
/// back to its caller.
fn run_inline<P: Payload>(this: &Arc<Shared<P>>, op: &Arc<OpCell<P>>) {
    let outcome = run::run(this, op, op.lane, run::INLINE_WORKER);
    if !matches!(outcome, Outcome::Pending) {
        // An error here is the fork gate's refusal, which only the
        // forking thread meets; a worker ignores it the same way.
        let _ = finish::finish_op(this, op, outcome, None, Which::AnyLive);
    }
}

/// From which queue length a push from this thread may run a
/// compute-lane op inline (`Config::run_inline_from`; the rule,
/// docs/DESIGN.md "Running inline"): never from inside an op of any
/// engine (a body run inline that pushes would nest bodies on one
/// stack), and never while the pusher holds the host lock (a compute
/// body must not hold it). Dispatch applies it to compute-lane ops only.
fn inline_from<P: Payload>(shared: &Shared<P>) -> Option<usize> {
    let from = shared.config().run_inline_from?;
    let allowed = crate::current::running_op().is_none() && !shared.bridge().holds_host_lock();
    allowed.then_some(from)
}

/// Takes a place under the pending bound, waiting for one if `block`.
fn reserve<P: Payload>(shared: &Shared<P>, block: bool) -> Result<()> {
    let bound = shared.bound();
    let Some(max) = bound.max() else {
        return Ok(());
    };
    // The bound rule: a push from inside an op of this engine never
    // waits for a place (its own op may hold the last one). Checked only
    // under a bound: the unbounded push path reads no thread-local.
    let block = block && (shared.calling_op().is_none() || control!(PushInsideOpWaits));
    loop {
        if bound.try_reserve(max) {
            return Ok(());
        }
        if !block {
            return Err(Error::Full);
        }
        {
            let _section = shared.enter()?;
            shared.lifecycle().lock().add_push_waiter(current_thread());
            if bound.has_room(max) {
                continue;
            }
            if shared.state().refuses_pushes() {
                return Err(Error::ShutDown);
            }
        }
        shared.park(Some(
            shared.clock().deadline_after(Duration::from_millis(50)),
        ));
    }
}

/// The positions of `spec`'s vars (reads, then writes) in var-id order: the
/// order a push takes their locks in. A var named twice, or more than
/// [`MAX_OP_VARS`] vars (a handle's var aside), is an error.
fn lock_order<P>(spec: &OpSpec<P>) -> Result<SmallVec<[u32; 4]>> {
    let n = spec.vars.len();
    if n - usize::from(spec.handle) > MAX_OP_VARS {
        return Err(Error::TooManyVars);
    }
    let id = |i: u32| spec.vars[i as usize].0.id();
    // `n <= MAX_OP_VARS + 1`, so every position fits.
    let mut order: SmallVec<[u32; 4]> = (0..n as u32).collect();
    order.sort_unstable_by_key(|&i| id(i));
    if order.windows(2).any(|w| id(w[0]) == id(w[1])) {
        return Err(Error::DuplicateVar);
    }
    Ok(order)
}
