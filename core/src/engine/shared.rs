//! The wiring: what workers, tokens, guards and the fork domain share. Each
//! field is a part that owns its state (its own module's `# State` says who
//! moves it and why); this file only builds them and hands them out, plus
//! the few steps every other file runs through: a fork-gate section
//! ([`Shared::enter`]) and a park with the host lock released
//! ([`Shared::park`]).
//!
//! # State
//!
//! `Shared` itself has no state of its own to move: each field is set once
//! at construction and never replaced, so the only transitions are the
//! parts' own. The one invariant this file keeps is that every bookkeeping
//! change runs inside a section ([`Shared::enter`], I5, I6), which also
//! settles the engine first in a fork child.
//!
//! | part | module | what it owns |
//! |---|---|---|
//! | `gate` | `fork_gate.rs` | the fork gate's sections (I5, I6) |
//! | `epoch` | `epoch.rs` | the fork epoch the state belongs to, settled once per child (I5) |
//! | `lifecycle` | `engine/lifecycle_cell.rs` | lifecycle state, quiesce holds, errors for `wait_all`, push waiters, fork report |
//! | `ids` | `ids.rs` | op and var ids |
//! | `bound` | `bound.rs` | the pending bound's count |
//! | `lanes` | `lane.rs` | each lane's pool, stop flag, host-bridge count |
//! | `ready` | `ready/` | each lane's ready queues and spin hint |
//! | `live` | `live.rs` | the accepted, not yet gone ops (I2, I5) |
//! | `waiters` | `engine/waiters.rs` | `wait_all` and shutdown waiters (I2) |
//! | `wait_graph` | `engine/wait_graph.rs` | the waits inside ops that block |
//! | `carried` | `carried.rs` | the op the forking thread runs |
//! | `exits` | `sync/exits.rs` | the workers' join handles |
//! | `tracer` | `trace.rs` | the optional op timeline |
//! | `completing` | `sync/` | model builds: threads inside a completion |

use super::lifecycle_cell::LifecycleCell;
use super::wait_graph::WaitGraph;
use super::waiters::Waiters;
use super::{Config, Payload};
use crate::bound::PendingBound;
use crate::carried::CarriedOp;
use crate::domain::ForkDomain;
use crate::epoch::EpochCell;
use crate::error::{Error, Result};
use crate::fork_gate::{ForkGate, Section};
use crate::host::HostBridge;
use crate::ids::Ids;
use crate::lane::LaneState;
use crate::lifecycle::State;
use crate::live::LiveIndex;
use crate::op_info::{Lane, OpInfo};
use crate::ready::{ReadyQueues, SpinHint};
use crate::spec::Var;
use crate::sync::{Arc, CachePadded, Clock, Exits, Instant, LockRank, Mutex, Tally, MODEL_BUILD};
use crate::trace::Tracer;
use std::time::Duration;

/// The steps the wiring runs without naming their modules, so that no
/// step's module and this one import each other: the engine module hands
/// them over at construction.
pub(crate) struct Steps<P: Payload> {
    /// A fork child's settle (`fork.rs`), run by [`Shared::enter`] at the
    /// child's first engine call.
    pub(crate) settle_child: fn(&Shared<P>),
    /// The loop a new worker thread runs (`worker.rs`), started by
    /// `spawn.rs`.
    pub(crate) worker_main: fn(Arc<Shared<P>>, Lane, usize),
}

/// The engine's parts, shared by its handles, workers, tokens and guards
/// (see the module's `# State`).
pub(crate) struct Shared<P: Payload> {
    id: u64,
    domain: &'static ForkDomain,
    gate: ForkGate,
    clock: Clock,
    bridge: Box<dyn HostBridge>,
    config: Config,
    /// Each lane's workers and flags, its lock on its own cache line: taken
    /// when a worker parks, wakes or starts, not per op.
    lanes: [CachePadded<Mutex<LaneState>>; 2],
    /// Each lane's ready queues, one per configured worker, each with its
    /// own lock: a push and a completion touch one of them.
    ready: [ReadyQueues<P>; 2],
    /// Production builds: each lane's spin hint, written per op only while
    /// one of its workers spins (`ready/spin_hint.rs`).
    spin_hints: [SpinHint; 2],
    lifecycle: LifecycleCell,
    ids: Ids,
    bound: PendingBound,
    live: LiveIndex<P>,
    waiters: Waiters,
    wait_graph: WaitGraph<P>,
    epoch: EpochCell,
    carried: CarriedOp,
    /// So shutdown returns only once every worker not running a body is
    /// gone (a raw fork that catches a std thread exiting can leave the
    /// child unable to start threads).
    exits: Exits,
    tracer: Tracer,
    /// Model builds: threads inside a completion's bookkeeping, for the
    /// fork-point check; production keeps nothing.
    completing: Tally,
    steps: Steps<P>,
}

impl<P: Payload> Shared<P> {
    /// The parts of a new engine of `domain`, not yet registered there and
    /// with no worker started; `config` is valid.
    pub(crate) fn new(
        domain: &'static ForkDomain,
        config: Config,
        bridge: Box<dyn HostBridge>,
        steps: Steps<P>,
    ) -> Self {
        let lanes = Lane::ALL.map(|lane| {
            CachePadded::new(Mutex::ranked(
                LaneState::new(config.workers(lane), config.max_stand_ins),
                LockRank::Lane,
            ))
        });
        let ready = Lane::ALL.map(|lane| {
            // Nobody else can reach this engine yet: no fork copies it.
            let wanted = crate::sync::without_section(|| lanes[lane.index()].lock().wanted());
            ReadyQueues::new(config.workers(lane), wanted)
        });
        Shared {
            id: domain.next_engine_id(),
            domain,
            gate: ForkGate::new(),
            clock: Clock::new(),
            bridge,
            ids: Ids::new(),
            bound: PendingBound::new(config.max_pending),
            config,
            lanes,
            ready,
            spin_hints: [SpinHint::new(), SpinHint::new()],
            lifecycle: LifecycleCell::new(),
            live: LiveIndex::new(),
            waiters: Waiters::new(),
            wait_graph: WaitGraph::new(),
            epoch: EpochCell::new(domain.epoch()),
            carried: CarriedOp::new(),
            exits: Exits::new(),
            tracer: Tracer::new(),
            completing: Tally::new(),
            steps,
        }
    }

    /// The engine's id within its domain.
    pub(crate) fn id(&self) -> u64 {
        self.id
    }

    pub(crate) fn domain(&self) -> &'static ForkDomain {
        self.domain
    }

    pub(crate) fn gate(&self) -> &ForkGate {
        &self.gate
    }

    pub(crate) fn clock(&self) -> &Clock {
        &self.clock
    }

    pub(crate) fn bridge(&self) -> &dyn HostBridge {
        &*self.bridge
    }

    pub(crate) fn config(&self) -> &Config {
        &self.config
    }

    /// `lane`'s workers and flags, behind the lane lock.
    pub(crate) fn lane(&self, lane: Lane) -> &Mutex<LaneState> {
        &self.lanes[lane.index()]
    }

    pub(crate) fn ready(&self, lane: Lane) -> &ReadyQueues<P> {
        &self.ready[lane.index()]
    }

    pub(crate) fn spin_hint(&self, lane: Lane) -> &SpinHint {
        &self.spin_hints[lane.index()]
    }

    pub(crate) fn lifecycle(&self) -> &LifecycleCell {
        &self.lifecycle
    }

    pub(crate) fn ids(&self) -> &Ids {
        &self.ids
    }

    pub(crate) fn bound(&self) -> &PendingBound {
        &self.bound
    }

    pub(crate) fn live(&self) -> &LiveIndex<P> {
        &self.live
    }

    pub(crate) fn waiters(&self) -> &Waiters {
        &self.waiters
    }

    pub(crate) fn wait_graph(&self) -> &WaitGraph<P> {
        &self.wait_graph
    }

    pub(crate) fn epoch(&self) -> &EpochCell {
        &self.epoch
    }

    pub(crate) fn carried(&self) -> &CarriedOp {
        &self.carried
    }

    pub(crate) fn exits(&self) -> &Exits {
        &self.exits
    }

    pub(crate) fn tracer(&self) -> &Tracer {
        &self.tracer
    }

    pub(crate) fn completing(&self) -> &Tally {
        &self.completing
    }

    /// The loop a new worker thread runs.
    pub(crate) fn worker_main(&self) -> fn(Arc<Shared<P>>, Lane, usize) {
        self.steps.worker_main
    }

    /// Opens a bookkeeping section (I5, I6): settles the engine first in a
    /// fork child; waits out a fork window opened by another thread (bounded
    /// by the fork itself, which waits on nothing); refuses the forking
    /// thread with `ForkInProgress`.
    pub(crate) fn enter(&self) -> Result<Section<'_>> {
        let mut round = 0;
        loop {
            if !self.epoch.is(self.domain.epoch()) {
                (self.steps.settle_child)(self);
            }
            if let Some(section) = self.gate.try_enter() {
                return Ok(section);
            }
            if self.domain.forking_here() {
                return Err(Error::ForkInProgress);
            }
            self.gate.wait_while(round, || {
                self.gate.is_closed() && self.epoch.is(self.domain.epoch())
            });
            round = round.saturating_add(1);
        }
    }

    /// Identifies the engine process-wide: its domain and its id there.
    pub(crate) fn key(&self) -> (usize, u64) {
        (self.domain.key(), self.id)
    }

    pub(crate) fn state(&self) -> State {
        self.lifecycle.state()
    }

    pub(crate) fn check_var(&self, var: &Var<P>) -> Result<()> {
        if var.engine() != self.key() {
            return Err(Error::ForeignVar);
        }
        Ok(())
    }

    /// The op the calling thread runs, if it belongs to this engine.
    pub(crate) fn calling_op(&self) -> Option<u64> {
        crate::current::running_op()
            .filter(|r| r.engine == self.key())
            .map(|r| r.op)
    }

    /// The deadline `timeout` from now; a zero timeout is an error.
    pub(crate) fn deadline(&self, timeout: Duration) -> Result<Instant> {
        if timeout.is_zero() {
            return Err(Error::ZeroTimeout);
        }
        Ok(self.clock.deadline_after(timeout))
    }

    /// The error a wait returns at this point, if it should stop early:
    /// its deadline passed (`pending` lists what is left), or the host
    /// asked for an interrupt.
    pub(crate) fn wait_expired(
        &self,
        deadline: Option<Instant>,
        pending: impl FnOnce() -> Vec<OpInfo>,
    ) -> Option<Error> {
        if deadline.is_some_and(|d| self.clock.passed(d)) {
            return Some(Error::Timeout { pending: pending() });
        }
        if self.bridge.interrupt_requested() {
            return Some(Error::Interrupted);
        }
        None
    }

    /// Blocks the calling thread, with the host lock released (H2), until
    /// unparked or `deadline`; called outside every section.
    pub(crate) fn park(&self, deadline: Option<Instant>) {
        let deadline = match (deadline, self.bridge_poll()) {
            (d, None) => d,
            (None, Some(step)) => Some(self.clock.deadline_after(step)),
            (Some(d), Some(step)) => Some(d.min(self.clock.deadline_after(step))),
        };
        crate::host::released(&*self.bridge, || {
            crate::sync::park_until(&self.clock, deadline)
        });
    }

    /// How often a wait wakes to poll the host for an interrupt.
    fn bridge_poll(&self) -> Option<Duration> {
        if MODEL_BUILD {
            None
        } else {
            self.bridge.interrupt_poll()
        }
    }
}
