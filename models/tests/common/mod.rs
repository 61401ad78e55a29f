//! The harness every loom and shuttle model shares (models/LOOM.md,
//! models/SHUTTLE.md), written once: this file is checker-neutral, and
//! `with_loom.rs` / `with_shuttle.rs` add what only one checker has (its
//! runner and the helpers built on its primitives).
//!
//! - [`Job`] is the op payload: an [`Effect`] of `forksafe-models` run in
//!   one of several [`Mode`]s (sync, async completed in the body, async
//!   handed to another thread, async whose token is dropped), with an
//!   optional in-body probe (I3) and an optional callback into the engine
//!   (H1).
//! - [`Op`] is one op of a model's program; [`World`] is one engine with a
//!   GIL-like host bridge, an oracle and its vars, that pushes [`Op`]s;
//!   [`World::child`] rebuilds a fork child's world from a snapshot.
//!
//! Everything a payload holds is plain std data (the oracle, the probe, the
//! hand-off), so a payload copied into a [`ForkSnapshot`] can outlive the
//! execution that made it: loom's child models run later, as models of
//! their own.

#![allow(dead_code)]

/// The negative controls of one checker as test pairs, one table row per
/// control: `caught_*` runs the row's scenario with its mutant on through
/// `caught` (which returns the checker's failure message) and passes only
/// if the message names one of the expected failures; `sound_*` runs the
/// same scenario with every mutant off through `sound` and must pass.
/// A row: `caught_name, sound_name: Mutant, scenario, "what is expected",
/// ["text", …];` (the sound name may be `_` when another row's twin is
/// this scenario's). Controls whose check is not of this shape are written
/// out beside the table.
#[allow(unused_macros)]
macro_rules! control_pairs {
    (@sound _, $sound:expr, $scenario:expr) => {};
    (@sound $sound_name:ident, $sound:expr, $scenario:expr) => {
        #[test]
        fn $sound_name() {
            ($sound)($scenario as fn());
        }
    };
    (
        caught: $caught:expr, sound: $sound:expr;
        $(
            $(#[$attr:meta])*
            $caught_name:ident, $sound_name:tt: $mutant:ident, $scenario:expr, $what:literal, [$($want:literal),+ $(,)?];
        )+
    ) => {
        $(
            $(#[$attr])*
            #[test]
            fn $caught_name() {
                let msg: String = ($caught)(
                    forksafe_core::controls::Mutant::$mutant,
                    $scenario as fn(),
                );
                assert!(
                    [$($want),+].iter().any(|w| msg.contains(w)),
                    "expected {}, got: {msg}",
                    $what
                );
            }
            control_pairs!(@sound $sound_name, $sound, $scenario);
        )+
    };
}

#[cfg(loom)]
mod with_loom;
#[cfg(loom)]
pub use with_loom::*;
#[cfg(shuttle)]
mod with_shuttle;
#[cfg(shuttle)]
pub use with_shuttle::*;

use forksafe_core::sync::Arc as FArc;
use forksafe_core::{
    BodyError, CompletionToken, Config, CoreEngine, Error, ForkDomain, ForkSnapshot, Lane, OpSpec,
    Payload, State, Var,
};
pub use forksafe_models::{Effect, Oracle, Probe, Step};
pub use forksafe_testkit::{GilBridge, HostLock};
use std::cell::RefCell;
use std::hash::{Hash, Hasher};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// A timeout long enough never to pass unless a model fires the clock.
pub const LONG: Duration = Duration::from_secs(1);

/// How a [`Job`] completes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Mode {
    /// A sync op.
    Sync,
    /// Async; the body completes its token.
    Async,
    /// Async; the body hands its token over: to the op's own [`Slot`] (the
    /// loom models), or to completer thread `i` of the world (the shuttle
    /// models, [`World::hand_off`]).
    Handoff(usize),
    /// Async; the body drops its token unfinished (TokenDropped, I2).
    DropToken,
}

impl Mode {
    /// Whether the op is async.
    pub fn is_async(self) -> bool {
        self != Mode::Sync
    }
}

/// A token handed over, with the result to complete it with.
pub type Handed = (CompletionToken<Job>, Result<(), String>);

/// Where a [`Mode::Handoff`] body hands its token: completer thread `i`
/// gets `handed`.
pub type HandOff = Arc<dyn Fn(usize, Handed) + Send + Sync>;

/// A one-op hand-off: the body leaves its token here for a thread that
/// polls the slot.
pub type Slot = Arc<Mutex<Option<Handed>>>;

/// A callback a body runs (into the engine, H1).
pub type Callback = Arc<dyn Fn() + Send + Sync>;

/// The op payload of the models.
#[derive(Clone)]
pub struct Job {
    /// What the body does, and on which oracle.
    pub effect: Effect,
    /// How it completes.
    pub mode: Mode,
    /// Where a [`Mode::Handoff`] body hands its token.
    pub hand_off: Option<HandOff>,
    /// In-body counter.
    pub probe: Option<Probe>,
    /// Run at the start of the body.
    pub call: Option<Callback>,
}

impl std::fmt::Debug for Job {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Job({:?}, {:?})", self.effect.step, self.mode)
    }
}

// Snapshots compare payloads by what they would do.
impl PartialEq for Job {
    fn eq(&self, other: &Self) -> bool {
        self.effect == other.effect && self.mode == other.mode
    }
}
impl Eq for Job {}
impl Hash for Job {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.effect.hash(state);
        self.mode.hash(state);
    }
}

forksafe_core::sync::thread_local! {
    /// Set on the model threads that drive a fork child world: a body run
    /// there (only ever an inherited op re-run by a broken child) acts on
    /// the child world's oracle, where the model looks. A model
    /// thread-local: the parent world's threads, still running in the same
    /// execution under shuttle, keep logging into the parent's oracle.
    static CHILD_ORACLE: RefCell<Option<Oracle>> = RefCell::new(None);
}

/// Marks the calling model thread as a driver of the child world `oracle`.
pub fn enter_child_world(oracle: &Oracle) {
    CHILD_ORACLE.with(|c| *c.borrow_mut() = Some(oracle.clone()));
}

impl Payload for Job {
    fn run(self, token: Option<CompletionToken<Self>>) -> Result<(), BodyError> {
        #[cfg(loom)]
        mark(format!("start {}", self.effect.step.label));
        if let Some(p) = &self.probe {
            p.enter();
        }
        if let Some(call) = &self.call {
            call();
        }
        let effect = match CHILD_ORACLE.with(|c| c.borrow().clone()) {
            Some(o) => o.effect(self.effect.step.clone()),
            None => self.effect.clone(),
        };
        // Effect::run has a scheduling point between its start and end.
        let result = effect.run(None).map_err(|e| e.message().to_string());
        if let Some(p) = &self.probe {
            p.leave();
        }
        #[cfg(loom)]
        mark(format!("end {}", self.effect.step.label));
        match (self.mode, token) {
            (_, None) => Ok(result?),
            (Mode::Sync | Mode::Async, Some(t)) => {
                Ok(t.complete(result).map_err(|e| e.to_string())?)
            }
            (Mode::Handoff(i), Some(t)) => {
                let hand_off = self
                    .hand_off
                    .as_ref()
                    .expect("handoff job without a hand-off");
                hand_off(i, (t, result));
                Ok(())
            }
            (Mode::DropToken, Some(t)) => {
                drop(t);
                Ok(())
            }
        }
    }
}

/// A step.
pub fn step(label: u32, reads: &[usize], writes: &[usize]) -> Step {
    Step {
        label,
        reads: reads.to_vec(),
        writes: writes.to_vec(),
        fail: false,
    }
}

/// A failing step.
pub fn failing(label: u32, reads: &[usize], writes: &[usize]) -> Step {
    Step {
        fail: true,
        ..step(label, reads, writes)
    }
}

/// The engine name of the op labelled `label`.
pub fn op_name(label: u32) -> String {
    format!("op{label}")
}

/// The label of an op named by [`op_name`].
pub fn label_of(name: &str) -> Option<u32> {
    name.strip_prefix("op")?.parse().ok()
}

/// Sorted labels named by the errors of a `wait_all` result
/// (`OpsFailed`).
pub fn failed_labels(r: &forksafe_core::Result<()>) -> Vec<u32> {
    match r {
        Ok(()) => vec![],
        Err(Error::OpsFailed(es)) => {
            let mut l: Vec<u32> = es.iter().filter_map(|e| label_of(&e.op().name)).collect();
            l.sort_unstable();
            l
        }
        Err(e) => panic!("wait_all returned {e:?}"),
    }
}

/// Sizing of a [`World`]'s engine. Keep `compute + host` small: every
/// worker is a model thread (loom allows five in all).
pub fn config(compute: usize, host: usize, max_pending: Option<usize>) -> Config {
    Config {
        compute_workers: compute,
        host_workers: host,
        max_pending,
        thread_name: "m".into(),
        worker_stack_size: None,
        max_stand_ins: forksafe_core::DEFAULT_MAX_STAND_INS,
        run_inline_from: None,
    }
}

/// One op of a model's program.
#[derive(Clone)]
pub struct Op {
    /// Label, reads, writes, fail.
    pub step: Step,
    /// Completion mode.
    pub mode: Mode,
    /// Lane.
    pub lane: Lane,
    /// Runs even on poisoned vars.
    pub run_on_error: bool,
    /// A `clear_poison` of `step.writes[0]` instead of a body.
    pub clear: bool,
    /// A [`Mode::Handoff`] op's own slot (instead of the world's
    /// completers).
    pub slot: Option<Slot>,
    /// Callback into the engine, run at the start of the body.
    pub call: Option<Callback>,
}

impl std::fmt::Debug for Op {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "Op({:?}, {:?}, {:?}{}{})",
            self.step,
            self.mode,
            self.lane,
            if self.run_on_error {
                ", run_on_error"
            } else {
                ""
            },
            if self.clear { ", clear" } else { "" }
        )
    }
}

impl Op {
    /// An op of `step` on `lane` completing in `mode`, with no callback.
    pub fn new(step: Step, mode: Mode, lane: Lane) -> Op {
        Op {
            step,
            mode,
            lane,
            run_on_error: false,
            clear: false,
            slot: None,
            call: None,
        }
    }
}

/// A sync op of `step` on `lane`.
pub fn sync(step: Step, lane: Lane) -> Op {
    Op::new(step, Mode::Sync, lane)
}

/// An async op of `step` on `lane` completing in `mode`; a hand-off gets a
/// slot of its own.
pub fn asynchronous(step: Step, lane: Lane, mode: Mode) -> Op {
    Op {
        slot: matches!(mode, Mode::Handoff(_)).then(Slot::default),
        ..Op::new(step, mode, lane)
    }
}

/// One model world: engine, host lock, oracle, vars.
pub struct World {
    /// The engine.
    pub engine: CoreEngine<Job>,
    /// Its host bridge (a GIL).
    pub gil: FArc<GilBridge>,
    /// What the bodies did.
    pub oracle: Oracle,
    /// The vars, slot i = var i.
    pub vars: Vec<Var<Job>>,
    /// The domain the engine lives in.
    pub domain: &'static ForkDomain,
    /// In-body counter shared by every job of this world.
    pub probe: Probe,
    /// Where [`Mode::Handoff`] ops without a slot hand their tokens (the
    /// shuttle models' completer threads).
    pub hand_off: Option<HandOff>,
}

impl World {
    /// A world with a fresh domain, a GIL bridge, `config` and `nvars`
    /// vars.
    pub fn new(config: Config, nvars: usize) -> World {
        let domain: &'static ForkDomain = Box::leak(Box::new(ForkDomain::new()));
        let gil = FArc::new(GilBridge::new());
        let engine = CoreEngine::with_bridge(domain, config, Box::new(gil.clone())).unwrap();
        let vars = (0..nvars).map(|_| engine.new_var().unwrap()).collect();
        World {
            engine,
            gil,
            oracle: Oracle::new(nvars),
            vars,
            domain,
            probe: Probe::default(),
            hand_off: None,
        }
    }

    /// The child world of `snap`, taken in a domain at `parent_epoch`: an
    /// engine rebuilt with fresh primitives in a domain one epoch on,
    /// sized by `config`, a fresh GIL, and a fresh oracle that the calling
    /// model thread drives ([`enter_child_world`]).
    pub fn child(parent_epoch: u64, config: Config, snap: &ForkSnapshot<Job>) -> World {
        let domain: &'static ForkDomain =
            Box::leak(Box::new(ForkDomain::with_epoch(parent_epoch + 1)));
        let gil = FArc::new(GilBridge::new());
        let (engine, vars) =
            CoreEngine::from_fork_snapshot(domain, config, Box::new(gil.clone()), snap).unwrap();
        let oracle = Oracle::new(vars.len());
        enter_child_world(&oracle);
        World {
            engine,
            gil,
            oracle,
            vars,
            domain,
            probe: Probe::default(),
            hand_off: None,
        }
    }

    /// The payload of `op` in this world.
    pub fn job(&self, op: &Op) -> Job {
        let hand_off = match &op.slot {
            Some(slot) => {
                let slot = slot.clone();
                let into_slot: HandOff = Arc::new(move |_, handed| {
                    *slot.lock().unwrap() = Some(handed);
                });
                Some(into_slot)
            }
            None => self.hand_off.clone(),
        };
        Job {
            effect: self.oracle.effect(op.step.clone()),
            mode: op.mode,
            hand_off,
            probe: Some(self.probe.clone()),
            call: op.call.clone(),
        }
    }

    /// The push request of `op` (not a clear) with payload `job`.
    pub fn spec(&self, op: &Op, job: Job) -> OpSpec<Job> {
        let vars = |slots: &[usize]| -> Vec<Var<Job>> {
            slots.iter().map(|&i| self.vars[i].clone()).collect()
        };
        let mut spec = OpSpec::new(job)
            .name(op_name(op.step.label))
            .lane(op.lane)
            .reads(&vars(&op.step.reads))
            .writes(&vars(&op.step.writes));
        if op.mode.is_async() {
            spec = spec.asynchronous();
        }
        if op.run_on_error {
            spec = spec.run_on_error();
        }
        spec
    }

    /// Pushes `op` with payload `job` (a clear pushes a `clear_poison`);
    /// returns its id.
    pub fn push_job(&self, op: &Op, job: Job) -> forksafe_core::Result<u64> {
        if op.clear {
            return self.engine.clear_poison(&self.vars[op.step.writes[0]]);
        }
        self.engine.push(self.spec(op, job))
    }

    /// Pushes `op` with [`World::job`]; returns its id.
    pub fn push(&self, op: &Op) -> forksafe_core::Result<u64> {
        self.push_job(op, self.job(op))
    }

    /// Pushes `ops` (none a clear) in one `push_batch`; their results.
    pub fn push_batch(&self, ops: &[Op]) -> Vec<forksafe_core::Result<u64>> {
        let specs = ops.iter().map(|op| self.spec(op, self.job(op)));
        self.engine.push_batch(specs)
    }

    /// Sorted labels of the bodies that ran.
    pub fn ran(&self) -> Vec<u32> {
        let mut r = self.oracle.ran();
        r.sort_unstable();
        r
    }
}

/// A parent world of one var with nothing pending, forked: the snapshot
/// taken at its fork point. Its child engine still has to settle.
pub fn quiet_parent_snapshot() -> ForkSnapshot<Job> {
    let w = World::new(config(1, 1, None), 1);
    w.domain.prepare();
    let snap = w.engine.fork_snapshot(&w.vars).unwrap();
    w.domain.parent();
    w.engine.shutdown(LONG).unwrap();
    snap
}

/// Control (h): in the child world of `snap`, a second thread forks again
/// while the main thread's first call settles the engine. The fork must
/// never copy a half-settled engine: from prepare to parent the engine's
/// gate stays closed, so no settle (which reopens it) runs inside the fork
/// window. Threads: main + forker (the child pushes nothing: no worker).
pub fn fork_while_child_settles(snap: &ForkSnapshot<Job>) {
    let w = Arc::new(World::child(0, config(1, 1, None), snap));
    let forker = {
        let w = w.clone();
        forksafe_core::sync::spawn_named("forker".into(), None, move || {
            w.domain.prepare();
            let closed = w.engine.fork_gate_closed();
            w.domain.parent();
            assert!(
                closed,
                "a fork in the child copied a half-settled engine: its gate was open \
                 inside the fork window (I5)"
            );
        })
        .unwrap()
    };
    w.engine.fork_report().unwrap().expect("the child settles");
    forker.join().unwrap();
    w.engine.shutdown(LONG).unwrap();
}

/// Control (i): `wait_for_var` whose writes all complete while a later
/// write to the same var, pushed after the wait took its target, is
/// queued. The later write's body blocks on a lock main holds until its
/// wait has returned, so a wait that is not woken at its own writes'
/// completion never returns, and every thread ends up blocked. Threads:
/// main (waits) + pusher + 1 compute.
pub fn wait_with_a_later_write_queued() {
    let w = Arc::new(World::new(config(1, 1, None), 1));
    w.push(&sync(step(1, &[], &[0]), Lane::Compute)).unwrap();
    let waiting = FArc::new(HostLock::new());
    waiting.acquire();
    let pusher = {
        let (w, waiting) = (w.clone(), waiting.clone());
        forksafe_core::sync::spawn_named("pusher".into(), None, move || {
            // Push op 2 once main waits (its target, op 1 only, is taken
            // before it registers) or has already returned.
            let mut round = 0;
            while w.engine.var_waiters(&w.vars[0]) == 0 && waiting.is_held() {
                forksafe_core::sync::spin_step(round);
                round += 1;
            }
            let after_the_wait: Callback = Arc::new(move || {
                waiting.acquire();
                waiting.release();
            });
            let later = Op {
                call: Some(after_the_wait),
                ..sync(step(2, &[], &[0]), Lane::Compute)
            };
            w.push(&later).unwrap();
        })
        .unwrap()
    };
    w.engine.wait_for_var(&w.vars[0]).unwrap();
    waiting.release();
    pusher.join().unwrap();
    w.engine.wait_all().unwrap();
    assert_eq!(w.ran(), vec![1, 2]);
    w.engine.shutdown(LONG).unwrap();
}

/// Control (j): a quiesce races a shutdown while an op is queued. The
/// quiesce either holds (and the shutdown overrides it) or is refused with
/// `ShutDown`; either way the queued op runs and the shutdown cancels
/// nothing (I3, I8). The deadline never fires in a model, so a shutdown
/// left waiting for an op no worker may take never returns. Threads: main
/// (shuts down) + quiescer + 1 compute.
pub fn quiesce_races_shutdown() {
    let w = Arc::new(World::new(config(1, 1, None), 1));
    w.push(&sync(step(1, &[], &[0]), Lane::Compute)).unwrap();
    let quiescer = {
        let w = w.clone();
        forksafe_core::sync::spawn_named("quiescer".into(), None, move || {
            match w.engine.quiesce(LONG) {
                Ok(guard) => drop(guard),
                Err(Error::ShutDown) => {}
                Err(e) => panic!("quiesce returned {e:?}"),
            }
        })
        .unwrap()
    };
    let report = w.engine.shutdown(LONG).unwrap();
    quiescer.join().unwrap();
    assert!(
        report.cancelled.is_empty(),
        "the shutdown cancelled a queued op: dispatch stayed paused (I3, I8): {report:?}"
    );
    assert_eq!(w.ran(), vec![1]);
}

/// Control (k): a worker completes op 1 (its completion hands var 0 to
/// op 2 and dispatches it) while main forks. Main waits (yielding: no
/// preemption spent) until op 1's body has run, so the checker's whole
/// preemption budget goes to where in op 1's completion the fork falls.
/// The fork point must be clean:
/// no engine lock held, no completion half done (docs/DESIGN.md, "The fork
/// point"). `checked`: take the snapshot with the fork-point check
/// ([`CoreEngine::fork_snapshot`]); otherwise as is, for a child model that
/// inherits whatever the fork point held. The parent goes on as before
/// (I6). Returns the snapshot and the program's steps by op id. Threads:
/// main + 1 compute.
pub fn completion_races_fork(checked: bool) -> (ForkSnapshot<Job>, Vec<(u64, Step)>) {
    let w = World::new(config(1, 1, None), 2);
    let prog = [
        sync(step(1, &[], &[0]), Lane::Compute),
        sync(step(2, &[0], &[1]), Lane::Compute),
    ];
    let pushed: Vec<(u64, Step)> = prog
        .iter()
        .map(|p| (w.push(p).unwrap(), p.step.clone()))
        .collect();
    while w.oracle.ran().is_empty() {
        forksafe_core::sync::spin_step(0);
    }
    w.domain.prepare();
    let snap = if checked {
        w.engine.fork_snapshot(&w.vars)
    } else {
        w.engine.fork_snapshot_as_is(&w.vars)
    }
    .unwrap();
    w.domain.parent();
    w.engine.wait_all().unwrap();
    assert_eq!(w.ran(), vec![1, 2], "each parent op once (I6)");
    w.engine.shutdown(LONG).unwrap();
    (snap, pushed)
}

/// The child world of a [`completion_races_fork`] snapshot: its first
/// call settles it, which takes every var's lock, and the ops pending at
/// the fork are reported lost (I5). A lock the fork point held fails the
/// model here, where the real child would hang. Threads: main (the child
/// pushes nothing: no worker).
///
/// On that failure the world is leaked, not dropped: the settle stopped
/// half-way with the gate closed, and dropping the engine would wait for a
/// shutdown that a model never times out, hiding the first failure behind
/// a livelock.
pub fn child_of_completion_race(snap: &ForkSnapshot<Job>) {
    let w = std::mem::ManuallyDrop::new(World::child(0, config(1, 1, None), snap));
    let report = w
        .engine
        .fork_report()
        .unwrap()
        .expect("the first call settles the child");
    let lost: Vec<u64> = report.lost.iter().map(|i| i.id).collect();
    assert_eq!(lost, snap.pending_ops(), "fork report (I5)");
    let _ = w.engine.wait_all();
    w.engine.shutdown(LONG).unwrap();
    drop(std::mem::ManuallyDrop::into_inner(w));
}

/// Control (l): op 1 fails and poisons var 0; op 2 reads var 0 and writes
/// var 1, so it is skipped and must pass the poison on: a wait for var 1
/// returns op 1's error, and op 2's body never runs (I7). Threads: main +
/// 1 compute.
pub fn poison_passes_on() {
    let w = World::new(config(1, 1, None), 2);
    w.push(&sync(failing(1, &[], &[0]), Lane::Compute)).unwrap();
    w.push(&sync(step(2, &[0], &[1]), Lane::Compute)).unwrap();
    match w.engine.wait_for_var(&w.vars[1]) {
        Err(Error::Poisoned(e)) => assert_eq!(e.op().name, "op1", "the poison names op 1"),
        r => panic!("a skipped op passed no poison on (I7): wait_for_var returned {r:?}"),
    }
    assert_eq!(failed_labels(&w.engine.wait_all()), vec![1]);
    assert_eq!(w.ran(), vec![1], "a skipped op ran (I7)");
    w.engine.shutdown(LONG).unwrap();
}

/// A body's callback into its own world `w`, which it reaches through a
/// weak handle (the world owns the engine that owns the body).
fn world_callback(w: &Arc<World>, f: impl Fn(&World) + Send + Sync + 'static) -> Callback {
    let weak = Arc::downgrade(w);
    Arc::new(move || f(&weak.upgrade().expect("world alive while its ops run")))
}

/// Control (m): op 1's body calls back into the engine, pushing op 2 on
/// its own lane, which is ready at once, so the push dispatches it under
/// the lane's slot lock. A body runs under no engine lock (H1), so the
/// callback never waits for its own thread. Threads: main + 1 compute.
pub fn body_pushes_onto_its_lane() {
    let w = Arc::new(World::new(config(1, 1, None), 2));
    let push_from_body = world_callback(&w, |w| {
        w.push(&sync(step(2, &[], &[1]), Lane::Compute)).unwrap();
    });
    let op1 = Op {
        call: Some(push_from_body),
        ..sync(step(1, &[], &[0]), Lane::Compute)
    };
    w.push(&op1).unwrap();
    w.engine.wait_all().unwrap();
    w.engine.wait_all().unwrap();
    assert_eq!(w.ran(), vec![1, 2]);
    w.engine.shutdown(LONG).unwrap();
}

/// Control (n), the access grant (I9): a data cell of var 0 is written by
/// op 1 (compute: 0 → 1), read by op 2 (host) and op 3 (compute), which
/// may run at once, then written by op 4 (host: × 10). Each body touches
/// the cell through `DataCell::read`/`write`, as the engine's data vars
/// do, and only because its op holds the matching grant; the model
/// checks every access (loom's `UnsafeCell`, and the cell's borrow
/// count), and that the readers saw 1 and the end value is 10. Threads:
/// main + 1 compute + 1 host.
pub fn data_access_follows_grants() {
    use forksafe_core::sync::DataCell;
    let w = World::new(config(1, 1, None), 1);
    let cell = FArc::new(DataCell::new(0u64));
    let seen = Arc::new(Mutex::new(Vec::new()));
    let writer = |label: u32, lane: Lane, f: fn(u64) -> u64| {
        let cell = cell.clone();
        let call: Callback = Arc::new(move || {
            // SAFETY: the op writes var 0, the cell's var: its body runs
            // holding the var's write grant (I9).
            let mut v = unsafe { cell.write() };
            let before = *v;
            // A scheduling point inside the borrow, so an access that
            // overlaps it can happen in the model.
            forksafe_core::sync::spin_step(0);
            *v = f(before);
        });
        Op {
            call: Some(call),
            ..sync(step(label, &[], &[0]), lane)
        }
    };
    let reader = |label: u32, lane: Lane| {
        let (cell, seen) = (cell.clone(), seen.clone());
        let call: Callback = Arc::new(move || {
            // SAFETY: the op reads var 0, the cell's var: its body runs
            // holding a read grant on it (I9).
            let v = unsafe { cell.read() };
            forksafe_core::sync::spin_step(0);
            seen.lock().unwrap().push(*v);
        });
        Op {
            call: Some(call),
            ..sync(step(label, &[0], &[]), lane)
        }
    };
    let prog = [
        writer(1, Lane::Compute, |v| v + 1),
        reader(2, Lane::Host),
        reader(3, Lane::Compute),
        writer(4, Lane::Host, |v| v * 10),
    ];
    for p in &prog {
        w.push(p).unwrap();
    }
    w.engine.wait_all().unwrap();
    assert_eq!(
        *seen.lock().unwrap(),
        vec![1, 1],
        "readers see op 1's write only (I1, I9)"
    );
    // SAFETY: every op on var 0 has completed, and no other is pushed.
    assert_eq!(*unsafe { cell.read() }, 10);
    w.engine.shutdown(LONG).unwrap();
}

/// Controls (s) and (t), the hand-off's empty -> non-empty edge
/// (`core/src/ready/README.md`, "No lost wake-up"): op 1 starts the compute
/// workers, and op 2 is pushed while they finish op 1 and go idle. A push
/// that queues after a worker's last look at the ready queues must read
/// that worker's idle registration and wake it. With two workers the two
/// ops land on different slots (by id), so a worker may have to take from
/// the other's slot. Threads: main + `compute` compute workers.
pub fn push_meets_a_parking_worker(compute: usize) {
    let w = World::new(config(compute, 1, None), 2);
    w.push(&sync(step(1, &[], &[0]), Lane::Compute)).unwrap();
    w.push(&sync(step(2, &[], &[1]), Lane::Compute)).unwrap();
    w.engine.wait_all().unwrap();
    let mut ran = w.ran();
    ran.sort_unstable();
    assert_eq!(ran, vec![1, 2], "an op was lost or ran twice");
    w.engine.shutdown(LONG).unwrap();
}

/// The same edge met by a batch push: op 1 starts the worker, then ops 2
/// and 3 (free vars, one ready queue) are queued in one hold of its lock
/// while the worker finishes op 1 and goes idle; the wake-up is read after
/// the hold. Threads: main + 1 compute.
pub fn batch_push_meets_a_parking_worker() {
    let w = World::new(config(1, 1, None), 3);
    w.push(&sync(step(1, &[], &[0]), Lane::Compute)).unwrap();
    let batch = [
        sync(step(2, &[], &[1]), Lane::Compute),
        sync(step(3, &[], &[2]), Lane::Compute),
    ];
    for pushed in w.push_batch(&batch) {
        pushed.unwrap();
    }
    w.engine.wait_all().unwrap();
    assert_eq!(w.ran(), vec![1, 2, 3], "an op was lost or ran twice");
    w.engine.shutdown(LONG).unwrap();
}

/// Control (u), I3 across slots: ops 1 and 2 start both compute workers
/// (one per slot: ids spread ops over slots), then a quiesce holds while
/// ops 3 and 4 are pushed onto the two slots. Each body checks that no
/// quiesce holds while it runs; ops 3 and 4 run once the guard drops. A
/// quiesce must pause every slot: the worker whose home is the slot left
/// unpaused would start an op there. Threads: main + 2 compute.
pub fn quiesce_holds_every_slot() {
    let w = Arc::new(World::new(config(2, 1, None), 2));
    let check_running = world_callback(&w, |w| {
        assert!(
            !matches!(w.engine.state(), State::Quiescing | State::Quiesced),
            "an op ran while a quiesce held (I3)"
        );
    });
    let push = |label: u32, var: usize| {
        let op = Op {
            call: Some(check_running.clone()),
            ..sync(step(label, &[], &[var]), Lane::Compute)
        };
        w.push(&op).unwrap();
    };
    push(1, 0);
    push(2, 1);
    w.engine.wait_all().unwrap();
    let guard = w.engine.quiesce(LONG).unwrap();
    push(3, 0);
    push(4, 1);
    drop(guard);
    w.engine.wait_all().unwrap();
    let mut ran = w.ran();
    ran.sort_unstable();
    assert_eq!(ran, vec![1, 2, 3, 4]);
    w.engine.shutdown(LONG).unwrap();
}

/// Control (v): ops their pusher runs inline (`run_inline_from: Some(0)`:
/// every op ready at its push, docs/DESIGN.md "Running inline") race a
/// quiesce on another thread. From the quiesce's return until its guard
/// drops no body may start (I3): a pusher starts its op under the slot's
/// lock, as a worker's take does, so either the quiesce counts it and
/// waits for it, or the pusher finds the slot paused and queues the op
/// for a worker. Every op runs in the end (I2). Threads: main (pushes) +
/// quiescer + 1 compute (started only for an op queued while the quiesce
/// held).
pub fn inline_run_meets_a_quiesce() {
    let config = Config {
        run_inline_from: Some(0),
        ..config(1, 1, None)
    };
    let w = Arc::new(World::new(config, 2));
    // A model atomic: every access is a point where the checker may switch
    // threads.
    let held = Arc::new(forksafe_core::sync::AtomicBool::new(false));
    let check_held: Callback = {
        let held = held.clone();
        Arc::new(move || {
            assert!(
                !held.load(forksafe_core::sync::Ordering::SeqCst),
                "an op ran while a quiesce held (I3)"
            );
        })
    };
    let quiescer = {
        let (w, held) = (w.clone(), held.clone());
        forksafe_core::sync::spawn_named("quiescer".into(), None, move || {
            let guard = w.engine.quiesce(LONG).unwrap();
            held.store(true, forksafe_core::sync::Ordering::SeqCst);
            held.store(false, forksafe_core::sync::Ordering::SeqCst);
            drop(guard);
        })
        .unwrap()
    };
    for (label, var) in [(1, 0), (2, 1)] {
        let op = Op {
            call: Some(check_held.clone()),
            ..sync(step(label, &[], &[var]), Lane::Compute)
        };
        w.push(&op).unwrap();
    }
    quiescer.join().unwrap();
    w.engine.wait_all().unwrap();
    assert_eq!(w.ran(), vec![1, 2]);
    w.engine.shutdown(LONG).unwrap();
}

/// Control (x), the wait rule: op 1's body pushes op 2 (writes var 1, on
/// its own lane) and waits for var 1; when the wait returns, op 2 has run.
/// One compute worker: op 2 runs on the stand-in the wait brings to life.
/// With the mutant the wait covers only ops pushed before op 1 and returns
/// at once. Threads: main + 1 compute + 1 stand-in.
pub fn wait_covers_own_push() {
    let w = Arc::new(World::new(config(1, 1, None), 2));
    let push_and_wait = world_callback(&w, |w| {
        w.push(&sync(step(2, &[], &[1]), Lane::Compute)).unwrap();
        w.engine.wait_for_var(&w.vars[1]).unwrap();
        assert!(
            w.oracle.ran().contains(&2),
            "a wait inside an op returned before an op it pushed"
        );
    });
    let op1 = Op {
        call: Some(push_and_wait),
        ..sync(step(1, &[], &[0]), Lane::Compute)
    };
    w.push(&op1).unwrap();
    w.engine.wait_all().unwrap();
    assert_eq!(w.ran(), vec![1, 2]);
    w.engine.shutdown(LONG).unwrap();
}

/// Control (y), the wait rule's search: op 1 (compute, writes var 0) and
/// op 2 (host, writes var 1), both pushed under a quiesce so that neither
/// runs before both are queued; each body pushes an op that reads the
/// other's var (so it is queued behind the other op) and waits for it.
/// Whichever lists its wait second would close a cycle: it fails with
/// `WaitOnSelf` naming itself, its op completes, and the other's wait
/// returns. In every schedule exactly one fails and all four ops run. With
/// the mutant both waits are listed and each waits for the other.
/// Threads: main + 1 compute + 1 host (+ a stand-in).
pub fn waits_that_would_close_a_cycle() {
    let w = Arc::new(World::new(config(1, 1, None), 4));
    let failed = Arc::new(Mutex::new(Vec::new()));
    let body = |label: u32, other: usize, x: usize| {
        let failed = failed.clone();
        world_callback(&w, move |w| {
            w.push(&sync(step(label + 10, &[other], &[x]), Lane::Compute))
                .unwrap();
            match w.engine.wait_for_var(&w.vars[x]) {
                Ok(()) => {}
                Err(forksafe_core::Error::WaitOnSelf { op, .. }) => {
                    failed.lock().unwrap().push(label_of(&op.name))
                }
                Err(e) => panic!("op {label}'s wait: {e:?}"),
            }
        })
    };
    let op1 = Op {
        call: Some(body(1, 1, 2)),
        ..sync(step(1, &[], &[0]), Lane::Compute)
    };
    let op2 = Op {
        call: Some(body(2, 0, 3)),
        ..sync(step(2, &[], &[1]), Lane::Host)
    };
    let hold = w.engine.quiesce(LONG).unwrap();
    w.push(&op1).unwrap();
    w.push(&op2).unwrap();
    drop(hold);
    w.engine.wait_all().unwrap();
    w.engine.wait_all().unwrap();
    assert_eq!(w.ran(), vec![1, 2, 11, 12]);
    let failed = failed.lock().unwrap().clone();
    assert_eq!(failed.len(), 1, "ops whose wait failed: {failed:?}");
    w.engine.shutdown(LONG).unwrap();
}
