//! Model builds only: fork as the OS does it. At prepare's fork point (gate
//! closed, no section open) the parent model checks the fork point
//! (`fork_point.rs`: no engine lock held, no completion half done) and
//! copies the engine into plain data; a child model rebuilds an engine from
//! that copy with fresh primitives, except that a lock held at the fork
//! point stays held by nobody the child has, in a domain whose epoch has
//! moved on, and its first call settles it exactly as a real child would
//! (docs/DESIGN.md, "How the models check this" and "The fork point").
//! loom allows few threads per run and never reuses one, so the two worlds
//! run as two models.

use super::fork_point::ForkPoint;
use super::Payload;
use super::{Config, CoreEngine};
use crate::domain::ForkDomain;
use crate::error::{Error, OpError, Result};
use crate::host::HostBridge;
use crate::lifecycle::State;
use crate::op::{Action, OpCell, OpStatus, VarList};
use crate::op_info::{Lane, OpInfo};
use crate::op_name::OpName;
use crate::spec::Var;
use crate::sync::Arc;
use crate::var::{Use, VarState};
use std::collections::HashMap;

/// A plain-data copy of an engine at the fork point.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ForkSnapshot<P> {
    epoch: u64,
    state: State,
    quiesces: usize,
    errors: Vec<OpError>,
    carried: u64,
    next_op: u64,
    next_var: u64,
    ops: Vec<OpCopy<P>>,
    vars: Vec<VarCopy>,
    lanes: Vec<LaneCopy>,
    /// Sections the fork gate counted at the fork point: the OS copies the
    /// count with the rest, and the child has no thread to take any back.
    gate_count: usize,
    /// The locks held and the completions in progress at the fork point.
    at_fork: ForkPoint,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct OpCopy<P> {
    info: OpInfo,
    reads: Vec<u64>,
    writes: Vec<u64>,
    run_on_error: bool,
    action: Action,
    missing: u32,
    status: OpStatus,
    /// The ready queue a running op was taken from.
    queue: usize,
    /// Whether its pusher runs it inline.
    inline: bool,
    payload: Option<P>,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct VarCopy {
    id: u64,
    holders: Vec<(u64, bool)>,
    queue: Vec<(u64, bool)>,
    version: u64,
    poison: Option<OpError>,
    deleted: bool,
    freed: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct LaneCopy {
    queues: Vec<QueueCopy>,
    workers: usize,
    stopped: bool,
    in_bridge: usize,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct QueueCopy {
    ready: Vec<u64>,
    running: usize,
    inline: usize,
    paused: bool,
    stopped: bool,
}

impl<P: Payload + Clone> CoreEngine<P> {
    /// Copies the engine at the fork point: call between
    /// [`ForkDomain::prepare`] and [`ForkDomain::parent`] on the forking
    /// thread. `vars` are the vars the child model will use (an engine keeps
    /// no list of idle vars, and `vars` must include every var of a
    /// pending op). [`Error::ForkInProgress`] is never returned;
    /// [`Error::InvalidConfig`] if the fork gate is open.
    ///
    /// # Panics
    ///
    /// If the fork point is not clean (see [`ForkPoint`]): a thread holds
    /// an engine lock or is inside a completion. That is the model's
    /// fork-point check failing; the real child would inherit the lock
    /// held or the completion half done.
    pub fn fork_snapshot(&self, vars: &[Var<P>]) -> Result<ForkSnapshot<P>> {
        let snap = self.fork_snapshot_as_is(vars)?;
        assert!(
            snap.at_fork.is_clean(),
            "fork-point check: {}; a real child would inherit this (docs/DESIGN.md, \"The fork \
             point\")",
            snap.at_fork
        );
        Ok(snap)
    }

    /// [`CoreEngine::fork_snapshot`] without the fork-point check: the copy
    /// records what the fork point held, and a child built from it inherits
    /// those locks held. For the models that show the child layer catches
    /// an unclean fork point on its own.
    pub fn fork_snapshot_as_is(&self, vars: &[Var<P>]) -> Result<ForkSnapshot<P>> {
        let s = &self.shared;
        if s.gate().try_enter().is_some() {
            return Err(Error::InvalidConfig("fork_snapshot outside a fork window"));
        }
        // First, before this thread takes any lock: the fork instant.
        let at_fork = super::fork_point::fork_point(s, vars);
        let ops: Vec<OpCopy<P>> = s
            .live()
            .all()
            .iter()
            .map(|op| OpCopy {
                info: op.info(),
                reads: op.vars().filter(|(_, w)| !w).map(|(v, _)| v.id()).collect(),
                writes: op.vars().filter(|(_, w)| *w).map(|(v, _)| v.id()).collect(),
                run_on_error: op.run_on_error,
                action: op.action,
                missing: op.missing(),
                status: op.status(),
                queue: op.queue(),
                inline: op.runs_inline(),
                // SAFETY: the fork gate is closed (checked above), so no
                // thread takes a payload meanwhile.
                payload: unsafe { op.cloned_payload() },
            })
            .collect();
        let copy_uses = |uses: &mut dyn Iterator<Item = &Use<OpCell<P>>>| -> Vec<(u64, bool)> {
            uses.map(|u| (u.op().id(), u.is_write())).collect()
        };
        let mut var_copies = Vec::new();
        for v in vars {
            s.check_var(v)?;
            let inner = v.state().lock();
            let (holders, queue, deleted, freed) = inner.parts();
            var_copies.push(VarCopy {
                id: v.id(),
                holders: copy_uses(&mut holders.iter()),
                queue: copy_uses(&mut queue.iter()),
                version: inner.version(),
                poison: inner.poison().cloned(),
                deleted,
                freed,
            });
        }
        let lanes = Lane::ALL
            .iter()
            .map(|&lane| {
                let ls = s.lane(lane).lock();
                let queues = s
                    .ready(lane)
                    .iter()
                    .map(|queue| {
                        let (ready, running, inline, paused, stopped) = queue.lock().copy();
                        QueueCopy {
                            ready,
                            running,
                            inline,
                            paused,
                            stopped,
                        }
                    })
                    .collect();
                let (workers, stopped, in_bridge) = ls.copy();
                LaneCopy {
                    queues,
                    workers,
                    stopped,
                    in_bridge,
                }
            })
            .collect();
        let ctl = s.lifecycle().lock();
        let (quiesces, errors) = ctl.copy();
        let (next_op, next_var) = s.ids().copy();
        Ok(ForkSnapshot {
            epoch: s.epoch().get(),
            state: ctl.state(),
            quiesces,
            errors,
            carried: s.carried().word(),
            next_op,
            next_var,
            ops,
            vars: var_copies,
            lanes,
            gate_count: s.gate().counted(),
            at_fork,
        })
    }

    /// The child world: an engine rebuilt from `snap` with fresh primitives,
    /// in `domain`, whose epoch must be past the snapshot's (a fresh domain
    /// from [`ForkDomain::with_epoch`]). Returns the engine and the vars, in
    /// the order given to [`CoreEngine::fork_snapshot`]. The engine settles at
    /// its first call, as a real child's does.
    pub fn from_fork_snapshot(
        domain: &'static ForkDomain,
        config: Config,
        bridge: Box<dyn HostBridge>,
        snap: &ForkSnapshot<P>,
    ) -> Result<(CoreEngine<P>, Vec<Var<P>>)> {
        let engine = CoreEngine::with_bridge(domain, config, bridge)?;
        let s = &engine.shared;
        s.gate().inherit(snap.gate_count);
        let key = s.key();
        let vars: Vec<Var<P>> = snap
            .vars
            .iter()
            .map(|v| Var::new(Arc::new(VarState::new(v.id, key))))
            .collect();
        let by_id: HashMap<u64, Var<P>> = vars.iter().map(|v| (v.id(), v.clone())).collect();
        let find = |id: &u64| {
            by_id
                .get(id)
                .map(|v| v.state().clone())
                .ok_or(Error::ForeignVar)
        };
        let mut ops: HashMap<u64, Arc<OpCell<P>>> = HashMap::new();
        for o in &snap.ops {
            let op = Arc::new(OpCell::new(
                o.info.id,
                snap.epoch,
                OpName::from(o.info.name.clone()),
                o.info.lane,
                o.info.priority,
                o.action,
                o.run_on_error,
                o.reads
                    .iter()
                    .map(|id| find(id).map(|v| (v, false)))
                    .chain(o.writes.iter().map(|id| find(id).map(|v| (v, true))))
                    .collect::<Result<VarList<P>>>()?,
                o.missing,
                o.payload.clone(),
            ));
            match o.status {
                OpStatus::Queued => {}
                OpStatus::Running => {
                    op.try_start(o.queue, o.inline);
                }
                OpStatus::Done => {
                    op.try_finish();
                }
            }
            s.live().insert(op.clone());
            ops.insert(o.info.id, op);
        }
        let rebuild = |uses: &[(u64, bool)]| -> Result<Vec<Use<OpCell<P>>>> {
            uses.iter()
                .map(|(id, write)| {
                    let op = ops.get(id).cloned().ok_or(Error::ForeignVar)?;
                    Ok(Use::new(op, *write))
                })
                .collect()
        };
        for (v, c) in vars.iter().zip(&snap.vars) {
            let holders = rebuild(&c.holders)?;
            let queue = rebuild(&c.queue)?.into();
            v.state().lock().restore(
                holders,
                queue,
                c.version,
                c.poison.clone(),
                (c.deleted, c.freed),
            );
        }
        for (lane, c) in Lane::ALL.iter().zip(&snap.lanes) {
            let mut ls = s.lane(*lane).lock();
            // The child's engine has the parent's configuration, so the
            // same number of queues.
            for (queue, sc) in s.ready(*lane).iter().zip(&c.queues) {
                let mut queue = queue.lock();
                for id in &sc.ready {
                    queue.push(ops.get(id).cloned().ok_or(Error::ForeignVar)?);
                }
                queue.restore(sc.running, sc.inline, sc.paused, sc.stopped);
            }
            ls.restore(c.workers, c.stopped, c.in_bridge);
        }
        {
            let mut ctl = s.lifecycle().lock();
            s.lifecycle().restore(&mut ctl, snap.state);
            ctl.restore_holds(snap.quiesces, snap.errors.clone());
        }
        s.carried().restore(snap.carried);
        s.ids().restore(snap.next_op, snap.next_var);
        s.epoch().set(snap.epoch);
        // As at the fork point: the gate is closed until the child settles,
        // and a lock held there is held by a thread the child does not have.
        s.gate().close();
        super::fork_point::each_lock(s, &vars, |name, lock| {
            if snap.at_fork.held.contains(&name) {
                lock.inherit_held();
            }
        });
        Ok((engine, vars))
    }
}

impl<P: Payload> CoreEngine<P> {
    /// Model builds: whether the engine's fork gate is closed (a model
    /// checks it at its fork point: closed from prepare to parent, I5, I6).
    pub fn fork_gate_closed(&self) -> bool {
        self.shared.gate().is_closed()
    }

    /// Model builds: threads registered in `var`'s `wait_for_var` waiters
    /// (a model orders a push after a waiter has taken its target with it).
    pub fn var_waiters(&self, var: &Var<P>) -> usize {
        let _section = self.shared.enter();
        let n = var.state().lock().waiters();
        n
    }
}

impl<P> ForkSnapshot<P> {
    /// What the fork point held (clean unless taken with
    /// [`CoreEngine::fork_snapshot_as_is`]).
    pub fn fork_point(&self) -> &ForkPoint {
        &self.at_fork
    }

    /// Ids of the ops pending at the fork.
    pub fn pending_ops(&self) -> Vec<u64> {
        self.ops.iter().map(|o| o.info.id).collect()
    }
}

impl ForkDomain {
    /// Model builds: a fresh domain at `epoch`, for a child world.
    pub fn with_epoch(epoch: u64) -> ForkDomain {
        let d = ForkDomain::new();
        for _ in 0..epoch {
            d.child();
        }
        d
    }
}
