//! The serial reference: what a program gives when every op runs alone, in
//! push order, the moment it is pushed (I1), with docs/DESIGN.md's error rules
//! (I7): a failing or panicking op poisons the vars it writes with an error
//! naming it; an op touching a poisoned var is skipped and passes the first
//! poison it finds (its reads, then its writes, in the order given) to the
//! vars it writes, unless it runs on error; poison sticks until
//! `clear_poison`; `wait_all` returns the errors first raised since the
//! previous `wait_all`.

use crate::program::{fail_message, mix, op_name, panic_message, Mode, OpStmt, Outcome, VARS};
use forksafe::{Error, Lane, OpError, OpErrorKind, OpInfo, Priority};

/// One var of the reference.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VarModel {
    /// The value the last successful write left.
    pub value: u64,
    /// Completed writes (every write counts, failed or skipped).
    pub version: u64,
    /// The poison, if any.
    pub poison: Option<OpError>,
    /// `delete_var` was pushed (later pushes get `DeletedVar`; waits too,
    /// since they wait for the deletion).
    pub deleted: bool,
}

/// What an accepted push is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RefKind {
    /// A user op, from statement `idx`.
    User {
        /// The statement index (its name and value label).
        idx: usize,
        /// The statement.
        op: OpStmt,
    },
    /// `delete_var(v)`.
    Delete(usize),
    /// `clear_poison(v)`.
    Clear(usize),
}

/// An accepted op, as the reference predicts the engine numbers it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RefOp {
    /// The engine's op id.
    pub id: u64,
    /// What it is.
    pub kind: RefKind,
}

impl RefOp {
    /// The op's info, as the engine reports it.
    pub fn info(&self) -> OpInfo {
        match &self.kind {
            RefKind::User { idx, op } => OpInfo {
                id: self.id,
                name: op_name(*idx),
                lane: if op.host { Lane::Host } else { Lane::Compute },
                priority: priority(op.priority),
            },
            RefKind::Delete(_) => internal_info(self.id, "delete_var"),
            RefKind::Clear(_) => internal_info(self.id, "clear_poison"),
        }
    }

    /// Vars read.
    pub fn reads(&self) -> Vec<usize> {
        match &self.kind {
            RefKind::User { op, .. } => op.reads.iter().map(|&v| v as usize).collect(),
            _ => Vec::new(),
        }
    }

    /// Vars written.
    pub fn writes(&self) -> Vec<usize> {
        match &self.kind {
            RefKind::User { op, .. } => op.writes.iter().map(|&v| v as usize).collect(),
            RefKind::Delete(v) | RefKind::Clear(v) => vec![*v],
        }
    }

    /// Whether `self` and a later op `other` must run in push order: they
    /// share a var and one of them writes it.
    pub fn conflicts(&self, other: &RefOp) -> bool {
        let (r1, w1, r2, w2) = (self.reads(), self.writes(), other.reads(), other.writes());
        w1.iter().any(|v| w2.contains(v) || r2.contains(v)) || r1.iter().any(|v| w2.contains(v))
    }
}

fn internal_info(id: u64, name: &str) -> OpInfo {
    OpInfo {
        id,
        name: name.to_string(),
        lane: Lane::Compute,
        priority: Priority::Normal,
    }
}

/// The priority band of a statement's priority code.
pub fn priority(code: u8) -> Priority {
    match code {
        0 => Priority::High,
        2 => Priority::Low,
        _ => Priority::Normal,
    }
}

/// What became of an op in the reference.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Fate {
    /// Its body ran (successfully or not).
    Ran,
    /// It was skipped: a var it touches was poisoned.
    Skipped,
    /// An internal op (delete, clear): no body.
    Internal,
}

/// What the reference predicts for an accepted op.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Predicted {
    /// Whether its body runs.
    pub fate: Fate,
    /// What the `wait_for_var` inside its body returns, if it waits.
    pub body_wait: Option<BodyWait>,
}

/// What a `wait_for_var` inside a body returns (docs/DESIGN.md, "Waiting
/// inside an op").
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BodyWait {
    /// `WaitOnSelf` naming the op itself: it writes the var.
    OnSelf,
    /// The var's result once every earlier write is complete (it reads the
    /// var): or `WaitOnSelf` naming a later op, if a write pushed after it
    /// and before the wait is queued behind it on the var (a race between
    /// the body and the program's next pushes, so either is right).
    Settled(Result<(), Error>),
}

impl BodyWait {
    /// Whether `got` is what this predicts, for an op with id `op`.
    pub fn accepts(&self, op: u64, got: &Result<(), Error>) -> bool {
        match (self, got) {
            (BodyWait::OnSelf, Err(Error::WaitOnSelf { op: o, on, .. })) => {
                o.id == op && on.id == op
            }
            (BodyWait::Settled(_), Err(Error::WaitOnSelf { op: o, on, .. })) => {
                o.id == op && on.id > op
            }
            (BodyWait::Settled(want), got) => want == got,
            (BodyWait::OnSelf, _) => false,
        }
    }
}

/// The serial reference state.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Model {
    /// The vars.
    pub vars: Vec<VarModel>,
    /// The id the engine gives the next accepted op.
    pub next_op: u64,
    /// Errors first raised since the previous `wait_all`.
    pub errors: Vec<OpError>,
}

impl Default for Model {
    fn default() -> Self {
        Model::new()
    }
}

impl Model {
    /// A fresh engine: every var 0, version 0, clean; op ids from 1.
    pub fn new() -> Self {
        Model {
            vars: (0..VARS)
                .map(|_| VarModel {
                    value: 0,
                    version: 0,
                    poison: None,
                    deleted: false,
                })
                .collect(),
            next_op: 1,
            errors: Vec::new(),
        }
    }

    /// Checks a push the engine would refuse: a var repeated, then a
    /// deleted var (the engine's order of checks).
    pub fn refuse(&self, vars: &[usize]) -> Option<Error> {
        let mut sorted = vars.to_vec();
        sorted.sort_unstable();
        if sorted.windows(2).any(|w| w[0] == w[1]) {
            return Some(Error::DuplicateVar);
        }
        if vars.iter().any(|&v| self.vars[v].deleted) {
            return Some(Error::DeletedVar);
        }
        None
    }

    /// Pushes an op: `Err` if refused (nothing changes), else the accepted
    /// op, already applied.
    pub fn push(&mut self, kind: RefKind) -> Result<(RefOp, Predicted), Error> {
        let probe = RefOp {
            id: self.next_op,
            kind,
        };
        let mut vars = probe.reads();
        vars.extend(probe.writes());
        if let Some(e) = self.refuse(&vars) {
            return Err(e);
        }
        self.next_op += 1;
        let body_wait = self.body_wait(&probe);
        let fate = self.apply(&probe);
        let body_wait = body_wait.filter(|_| fate == Fate::Ran);
        Ok((probe, Predicted { fate, body_wait }))
    }

    /// What a `wait_for_var` inside `op`'s body returns, before `op` runs:
    /// `WaitOnSelf` on a var it writes; on a var it reads, every earlier
    /// write is complete, so the var's poison (see [`BodyWait`]).
    pub fn body_wait(&self, op: &RefOp) -> Option<BodyWait> {
        let RefKind::User { op: stmt, .. } = &op.kind else {
            return None;
        };
        let v = stmt.waited_var()? as usize;
        if op.writes().contains(&v) {
            return Some(BodyWait::OnSelf);
        }
        Some(BodyWait::Settled(self.wait_var(v)))
    }

    /// Runs an accepted op serially.
    pub fn apply(&mut self, op: &RefOp) -> Fate {
        match &op.kind {
            RefKind::Delete(v) => {
                let var = &mut self.vars[*v];
                var.deleted = true;
                var.version += 1;
                Fate::Internal
            }
            RefKind::Clear(v) => {
                let var = &mut self.vars[*v];
                var.poison = None;
                var.version += 1;
                Fate::Internal
            }
            RefKind::User { idx, op: stmt } => {
                let (reads, writes) = (op.reads(), op.writes());
                let poisoned = reads
                    .iter()
                    .chain(writes.iter())
                    .find_map(|&v| self.vars[v].poison.clone());
                let (error, raised, fate) = match poisoned {
                    Some(e) if !stmt.run_on_error => (Some(e), false, Fate::Skipped),
                    _ => match stmt.outcome {
                        Outcome::Ok => {
                            let read: Vec<u64> =
                                reads.iter().map(|&r| self.vars[r].value).collect();
                            for &w in &writes {
                                let var = &mut self.vars[w];
                                var.value = mix(*idx as u64, &read, var.value);
                            }
                            (None, false, Fate::Ran)
                        }
                        outcome => {
                            let kind = error_kind(*idx, stmt.mode, outcome);
                            (Some(OpError::new(op.info(), kind)), true, Fate::Ran)
                        }
                    },
                };
                for &w in &writes {
                    let var = &mut self.vars[w];
                    if var.poison.is_none() {
                        var.poison = error.clone();
                    }
                    var.version += 1;
                }
                if raised {
                    self.errors.extend(error);
                }
                fate
            }
        }
    }

    /// Completes a pending op in a fork child without running it: the vars
    /// it writes get `LostInFork` (unless already poisoned), deletions are
    /// carried out.
    pub fn lose(&mut self, op: &RefOp) {
        let error = match op.kind {
            RefKind::Delete(_) => {
                self.apply(op);
                return;
            }
            _ => OpError::new(op.info(), OpErrorKind::LostInFork),
        };
        for w in op.writes() {
            let var = &mut self.vars[w];
            if var.poison.is_none() {
                var.poison = Some(error.clone());
            }
            var.version += 1;
        }
        self.errors.push(error);
    }

    /// The value `op` would write to var `w` if it ran now (for a raw
    /// fork, where a running op may have written before the fork).
    pub fn would_write(&self, op: &RefOp, w: usize) -> Option<u64> {
        let RefKind::User { idx, op: stmt } = &op.kind else {
            return None;
        };
        if stmt.outcome != Outcome::Ok || !op.writes().contains(&w) {
            return None;
        }
        let read: Vec<u64> = op.reads().iter().map(|&r| self.vars[r].value).collect();
        Some(mix(*idx as u64, &read, self.vars[w].value))
    }

    /// What `wait_for_var(v)` returns.
    pub fn wait_var(&self, v: usize) -> Result<(), Error> {
        let var = &self.vars[v];
        if var.deleted {
            return Err(Error::DeletedVar);
        }
        match &var.poison {
            Some(e) => Err(Error::Poisoned(e.clone())),
            None => Ok(()),
        }
    }

    /// What `wait_all` returns; takes the errors.
    pub fn wait_all(&mut self) -> Result<(), Error> {
        let mut errors = std::mem::take(&mut self.errors);
        if errors.is_empty() {
            return Ok(());
        }
        errors.sort_by_key(|e| e.op().id);
        Err(Error::OpsFailed(errors))
    }
}

/// The error kind an op of `mode` ending with `outcome` raises.
pub fn error_kind(idx: usize, mode: Mode, outcome: Outcome) -> OpErrorKind {
    match (mode, outcome) {
        (_, Outcome::Fail) => OpErrorKind::Failed(fail_message(idx)),
        (Mode::AsyncThread, Outcome::Panic) => OpErrorKind::TokenDropped,
        (_, Outcome::Panic) => OpErrorKind::Panicked(panic_message(idx)),
        (_, Outcome::Ok) => unreachable!("an op that succeeds raises nothing"),
    }
}
