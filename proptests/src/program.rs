//! The program language: a handful of vars, and statements that push ops
//! (sync, async, host, failing, panicking), delete vars, clear poison, wait
//! on a var or on everything, quiesce and resume, and fork.

use std::fmt;

/// How many vars a program uses.
pub const VARS: usize = 4;

/// How an op's body ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Outcome {
    /// It writes its values and succeeds.
    Ok,
    /// It fails with an error message (writes nothing).
    Fail,
    /// Sync and inline-async: the body panics (writes nothing). Async on a
    /// helper thread: the helper drops the token unfinished.
    Panic,
}

/// How an op completes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Mode {
    /// A sync op: done when the body returns.
    Sync,
    /// An async op whose body completes its token before returning.
    AsyncInline,
    /// An async op whose body hands the token to a helper thread, which
    /// does the work and completes it.
    AsyncThread,
}

/// An op statement.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct OpStmt {
    /// Vars read (indices below [`VARS`]).
    pub reads: Vec<u8>,
    /// Vars written.
    pub writes: Vec<u8>,
    /// How the body ends.
    pub outcome: Outcome,
    /// Sync or async.
    pub mode: Mode,
    /// On the host lane (else compute).
    pub host: bool,
    /// Runs even if a var it touches is poisoned.
    pub run_on_error: bool,
    /// Priority band: 0 high, 1 normal, 2 low.
    pub priority: u8,
    /// The body calls `wait_for_var` on the op's first var (its reads, then
    /// its writes): `WaitOnSelf` if the op writes it, else the var's
    /// poison, since every earlier write of it is complete (docs/DESIGN.md,
    /// "Waiting inside an op").
    pub body_wait: bool,
}

impl OpStmt {
    /// The var the body waits on, if it waits.
    pub fn waited_var(&self) -> Option<u8> {
        if !self.body_wait {
            return None;
        }
        self.reads.first().or(self.writes.first()).copied()
    }
}

/// One statement of a program.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Stmt {
    /// Push an op.
    Op(OpStmt),
    /// `delete_var`.
    Delete(u8),
    /// `clear_poison`.
    Clear(u8),
    /// `wait_for_var`, then compare the var (value, version, poison) and
    /// the wait's result with the reference. Skipped while a quiesce holds.
    WaitVar(u8),
    /// `wait_all`, then compare every var and the errors. Skipped while a
    /// quiesce holds.
    WaitAll,
    /// Take a quiesce (nested ones count).
    Quiesce,
    /// Drop the most recent quiesce guard (nothing if none is held).
    Resume,
    /// Fork (drained with `forksafe::fork_with`, or raw with `fork(2)`):
    /// the child checks its state against the reference at the fork point
    /// and runs the rest of the program (without forking again); the
    /// parent goes on unaffected. Skipped where forks are off (fuzzing).
    Fork {
        /// `forksafe::fork_with` (else a raw fork).
        drained: bool,
    },
}

/// A program: an engine's sizing and a list of statements.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Program {
    /// Compute workers (1..=3).
    pub compute_workers: u8,
    /// Host workers (1..=2).
    pub host_workers: u8,
    /// Host ops go through a GIL-like bridge, and the pushing thread holds
    /// that lock for the whole program (as Python's main thread would).
    pub gil: bool,
    /// The statements, run in order by one pushing thread.
    pub stmts: Vec<Stmt>,
}

impl Program {
    /// Whether any statement forks.
    pub fn forks(&self) -> bool {
        self.stmts.iter().any(|s| matches!(s, Stmt::Fork { .. }))
    }
}

impl fmt::Display for OpStmt {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mode = match self.mode {
            Mode::Sync => "sync",
            Mode::AsyncInline => "async",
            Mode::AsyncThread => "async-thread",
        };
        let outcome = match self.outcome {
            Outcome::Ok => "ok",
            Outcome::Fail => "fail",
            Outcome::Panic => "panic",
        };
        write!(
            f,
            "op {mode} {outcome} reads{:?} writes{:?}",
            self.reads, self.writes
        )?;
        if self.host {
            write!(f, " host")?;
        }
        if self.run_on_error {
            write!(f, " run_on_error")?;
        }
        if self.priority != 1 {
            write!(f, " prio{}", self.priority)?;
        }
        if let Some(v) = self.waited_var() {
            write!(f, " waits-on-v{v}")?;
        }
        Ok(())
    }
}

impl fmt::Display for Stmt {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Stmt::Op(op) => write!(f, "{op}"),
            Stmt::Delete(v) => write!(f, "delete v{v}"),
            Stmt::Clear(v) => write!(f, "clear_poison v{v}"),
            Stmt::WaitVar(v) => write!(f, "wait_for_var v{v}"),
            Stmt::WaitAll => write!(f, "wait_all"),
            Stmt::Quiesce => write!(f, "quiesce"),
            Stmt::Resume => write!(f, "resume"),
            Stmt::Fork { drained: true } => write!(f, "fork (drained)"),
            Stmt::Fork { drained: false } => write!(f, "fork (raw)"),
        }
    }
}

impl fmt::Display for Program {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "program: {} compute, {} host workers{}",
            self.compute_workers,
            self.host_workers,
            if self.gil {
                ", GIL held by the pusher"
            } else {
                ""
            }
        )?;
        for (i, s) in self.stmts.iter().enumerate() {
            writeln!(f, "  s{i}: {s}")?;
        }
        Ok(())
    }
}

/// The value an op writes to each var it writes: a mix of its statement
/// index, the values it read and the var's old value (so a reordering of
/// two writes, or a read of the wrong version, changes the result).
pub fn mix(label: u64, reads: &[u64], old: u64) -> u64 {
    let mut h = old.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ label.wrapping_add(1);
    for r in reads {
        h = h.rotate_left(17) ^ r.wrapping_mul(0xBF58_476D_1CE4_E5B9);
    }
    h
}

/// The op name of statement `idx` (errors name ops by it).
pub fn op_name(idx: usize) -> String {
    format!("s{idx}")
}

/// The failure message of statement `idx`.
pub fn fail_message(idx: usize) -> String {
    format!("s{idx} fails")
}

/// The panic message of statement `idx`. Contains [`PANIC_MARK`].
pub fn panic_message(idx: usize) -> String {
    format!("s{idx} {PANIC_MARK}")
}

/// Marks the panics programs raise on purpose (the test panic hook keeps
/// quiet about them).
pub const PANIC_MARK: &str = "panics on purpose";
