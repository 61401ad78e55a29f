//! Waiting: `wait_for_var` and `wait_all` (I2), with deadlines, host-lock
//! release (H2) and host interrupts. A wait from inside an op waits only for
//! ops pushed before the calling op: any later op may depend on it, so
//! waiting for one could deadlock (docs/DESIGN.md, "Waiting inside an op").

use super::Payload;
use super::{Engine, Shared};
use crate::error::{Error, Result};
use crate::op_info::{Lane, OpInfo};
use crate::pool::Spawns;
use crate::spec::Var;
use crate::sync::{current_thread, Arc, Instant, Ordering, Thread};
use std::time::Duration;

impl<P: Payload> Engine<P> {
    /// Returns once every write of `var` pushed before this call has
    /// completed; then the var's poison, if any, as [`Error::Poisoned`].
    /// From inside an op that writes `var`: [`Error::WaitOnSelf`].
    pub fn wait_for_var(&self, var: &Var<P>) -> Result<()> {
        Shared::wait_var(&self.shared, var, None)
    }

    /// [`Engine::wait_for_var`] with a deadline: [`Error::Timeout`] lists the
    /// writes still pending when it passes.
    pub fn wait_for_var_timeout(&self, var: &Var<P>, timeout: Duration) -> Result<()> {
        let deadline = self.shared.deadline(timeout)?;
        Shared::wait_var(&self.shared, var, Some(deadline))
    }

    /// Returns once every op pushed before this call has completed; then
    /// every error first raised since the previous `wait_all`, as
    /// [`Error::OpsFailed`].
    pub fn wait_all(&self) -> Result<()> {
        Shared::wait_all(&self.shared, None)
    }

    /// [`Engine::wait_all`] with a deadline: [`Error::Timeout`] lists the ops
    /// still pending when it passes.
    pub fn wait_all_timeout(&self, timeout: Duration) -> Result<()> {
        let deadline = self.shared.deadline(timeout)?;
        Shared::wait_all(&self.shared, Some(deadline))
    }
}

impl<P: Payload> Shared<P> {
    pub(crate) fn deadline(&self, timeout: Duration) -> Result<Instant> {
        if timeout.is_zero() {
            return Err(Error::ZeroTimeout);
        }
        Ok(self.clock.deadline_after(timeout))
    }

    /// The error a wait returns at this point, if it should stop early.
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

    fn wait_var(this: &Arc<Self>, var: &Var<P>, deadline: Option<Instant>) -> Result<()> {
        this.check_var(var)?;
        let caller = this.calling_op();
        let mut target = None;
        let mut blocked = None;
        let result = loop {
            let section = this.enter()?;
            let mut v = var.state.inner.lock();
            // Read under the var's lock: see `VarInner::pending_writes`.
            let target = *target.get_or_insert(this.next_op.load(Ordering::Acquire));
            if v.freed {
                break Err(Error::DeletedVar);
            }
            if let Some(c) = caller {
                if v.holders.iter().any(|u| u.write && u.op.id == c) {
                    break Err(Error::WaitOnSelf);
                }
            }
            let pending = v.pending_writes(caller.map_or(target, |c| c.min(target)));
            if pending.is_empty() {
                break match &v.poison {
                    Some(e) => Err(Error::Poisoned(e.clone())),
                    None => Ok(()),
                };
            }
            if let Some(e) =
                this.wait_expired(deadline, || pending.iter().map(|op| op.info()).collect())
            {
                break Err(e);
            }
            v.waiters.push(current_thread());
            drop(v);
            if let Err(e) = Shared::block(this, section, caller, &mut blocked, deadline) {
                break Err(e);
            }
        };
        this.unblock_caller(blocked);
        result
    }

    fn wait_all(this: &Arc<Self>, deadline: Option<Instant>) -> Result<()> {
        let caller = this.calling_op();
        let limit = caller.unwrap_or_else(|| this.next_op.load(Ordering::Acquire));
        let me = this.join_all_waiters()?;
        let mut blocked = None;
        let result = loop {
            let section = match this.enter() {
                Ok(s) => s,
                Err(e) => break Err(e),
            };
            // Only the op to wait on next: the list of them all (a copy of
            // each op's name) is made only for a timeout's report.
            let blocker = this.live.first_below(limit, None);
            let done = blocker.is_none();
            let expired = if done {
                None
            } else {
                this.wait_expired(deadline, || this.live.below(limit))
            };
            // The ops left may all have completed between the check and
            // the report: then the wait is over, not timed out.
            let done =
                done || matches!(&expired, Some(Error::Timeout { pending }) if pending.is_empty());
            if done {
                let errors = std::mem::take(&mut this.control.lock().errors);
                break if errors.is_empty() {
                    Ok(())
                } else {
                    Err(Error::OpsFailed(errors))
                };
            }
            if let Some(e) = expired {
                break Err(e);
            }
            // Parks only if its completion is sure to see this waiter.
            if blocker.is_some_and(|op| !this.waiters.block_on(&me, &op)) {
                continue;
            }
            if let Err(e) = Shared::block(this, section, caller, &mut blocked, deadline) {
                break Err(e);
            }
        };
        this.unblock_caller(blocked);
        this.leave_all_waiters(&me);
        result
    }

    /// Registers the calling thread as a waiter for the live set; it must
    /// register before it first scans.
    pub(crate) fn join_all_waiters(&self) -> Result<Thread> {
        let me = current_thread();
        let _section = self.enter()?;
        self.waiters.join_all(me.clone());
        Ok(me)
    }

    pub(crate) fn leave_all_waiters(&self, me: &Thread) {
        if let Ok(_section) = self.enter() {
            self.waiters.leave_all(me);
        }
    }

    /// Ends `section` and parks until woken or `deadline`, after marking a
    /// calling op's worker as blocked (so its lane can bring a stand-in to
    /// life). Fails, without parking, when the lane is at its stand-in cap
    /// ([`Error::StandInLimit`]) or the stand-in it needed could not start
    /// ([`Error::Spawn`]): the wait returns that error rather than risk
    /// waiting for ever.
    fn block(
        this: &Arc<Self>,
        section: crate::gate::Section<'_>,
        caller: Option<u64>,
        blocked: &mut Option<Lane>,
        deadline: Option<Instant>,
    ) -> Result<()> {
        let spawns = this.block_caller(caller, blocked)?;
        this.waiters.register_timed(deadline);
        drop(section);
        Shared::start_workers(this, spawns)?;
        this.park(deadline);
        Ok(())
    }

    /// Marks the calling op's worker as blocked in a wait, once, and plans a
    /// stand-in worker if the lane would otherwise be short; inside a
    /// section. Refused at the lane's stand-in cap. A wait inside an op run
    /// inline by its pusher marks nothing: no worker is blocked.
    fn block_caller(&self, caller: Option<u64>, blocked: &mut Option<Lane>) -> Result<Spawns> {
        let mut spawns = Spawns::new();
        if blocked.is_some() {
            return Ok(spawns);
        }
        // An op its pusher runs inline blocks no worker of the pool.
        let on_worker = caller
            .and_then(|c| self.live.get(c))
            .filter(|op| !op.runs_inline());
        let Some(lane) = on_worker.map(|op| op.lane) else {
            return Ok(spawns);
        };
        let mut ls = self.lane(lane).lock();
        ls.pool
            .block()
            .map_err(|limit| Error::StandInLimit { limit })?;
        *blocked = Some(lane);
        if !ls.pool.has_idle() && ls.pool.is_short() && !self.ready(lane).is_empty() {
            spawns.push((lane, ls.pool.add_worker()));
        }
        Ok(spawns)
    }

    fn unblock_caller(&self, blocked: Option<Lane>) {
        if let Some(lane) = blocked {
            if let Ok(_section) = self.enter() {
                self.lane(lane).lock().pool.unblock();
            }
        }
    }
}
