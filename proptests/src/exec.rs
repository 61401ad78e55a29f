//! Runs a program on the real engine, statement by statement, beside the
//! serial reference, and compares at every observation point: each push's
//! result and op id, each wait's result, every var's value, version and
//! poison after a wait, the errors of `wait_all`, how many times each body
//! ran, and, after a fork, the child's whole state.

use crate::forking::{exit_now, read_pipe, wait_child, write_fd};
use crate::program::{fail_message, mix, panic_message, Mode, OpStmt, Outcome, Program, Stmt};
use crate::reference::{BodyWait, Fate, Model, Predicted, RefKind, RefOp};
use forksafe::{
    Config, CoreConfig, Engine, Error, Forked, OpSpec, QuiesceGuard, State, Token, Var,
};
use forksafe_testkit::GilBridge;
use std::collections::BTreeSet;
use std::os::fd::AsRawFd;
use std::panic::{catch_unwind, panic_any, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

/// How a program is run.
#[derive(Debug, Clone)]
pub struct Options {
    /// Whether `Fork` statements fork (else they are skipped).
    pub forks: bool,
    /// Bound on each wait and quiesce: passing it is a failure (a hang).
    pub wait_timeout: Duration,
    /// Watchdog of each fork child.
    pub child_limit: Duration,
    /// After the run, wait (bounded) until the engine's threads have left,
    /// so that the next program's raw forks do not catch them exiting (see
    /// `known_child_hang` in tests/differential.rs).
    pub settle_threads: bool,
    /// Threads that push each run of consecutive op statements at once
    /// (1: the runner pushes everything itself, in program order). With
    /// more, the ops of a run go round-robin to that many threads started
    /// together; the reference then takes them in the engine's id order,
    /// which is the order of every var's queue (I1).
    pub pushers: usize,
    /// The engine's `CoreConfig::run_inline_from` (pushers running ready ops
    /// themselves; docs/DESIGN.md "Running inline").
    pub run_inline_from: Option<usize>,
    /// Push each run of consecutive op statements with one `push_batch`
    /// (with one pusher): the reference takes them as single pushes in
    /// program order, which a batch must equal.
    pub batch: bool,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            forks: false,
            wait_timeout: Duration::from_secs(10),
            child_limit: Duration::from_secs(30),
            settle_threads: true,
            pushers: 1,
            run_inline_from: None,
            batch: false,
        }
    }
}

/// What a run did, for reports.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Stats {
    /// Ops accepted (user ops, deletions, clears).
    pub pushed: usize,
    /// Pushes refused with a typed error, as the reference predicted.
    pub refused: usize,
    /// Waits compared.
    pub waits: usize,
    /// Forks whose child passed.
    pub forks: usize,
    /// Ops children inherited and completed with `LostInFork`.
    pub lost_in_children: usize,
}

/// State the op bodies share with the test.
struct Shared {
    /// The vars' values.
    mem: Vec<AtomicU64>,
    /// How many times each statement's body ran.
    runs: Vec<AtomicU32>,
    /// Set while a quiesce holds: no body may run.
    quiesced: AtomicBool,
    /// Contract violations seen inside bodies (touched only on failure).
    violations: Mutex<Vec<String>>,
    /// What each statement's in-body `wait_for_var` returned.
    body_waits: Vec<Mutex<Option<Result<(), Error>>>>,
    /// The GIL-like host lock, when the program uses one.
    gil: Option<Arc<GilBridge>>,
}

impl Shared {
    fn violation(&self, what: String) {
        if let Ok(mut v) = self.violations.try_lock() {
            v.push(what);
        }
    }
}

/// How many times a statement's body must have run once everything
/// completed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Runs {
    Once,
    Never,
    AtMostOnce,
}

/// Runs `program` against the reference; `Err` describes the first
/// difference.
pub fn run_program(program: &Program, options: &Options) -> Result<Stats, String> {
    let gil = program.gil.then(|| Arc::new(GilBridge::new()));
    let config = Config {
        core: CoreConfig {
            compute_workers: program.compute_workers.clamp(1, 3) as usize,
            host_workers: program.host_workers.clamp(1, 2) as usize,
            run_inline_from: options.run_inline_from,
            ..CoreConfig::default()
        },
        fork_drain: options.wait_timeout,
        shutdown_deadline: options.wait_timeout,
    };
    let engine = Arc::new(
        match &gil {
            Some(g) => Engine::with_bridge(config, Box::new(g.clone())),
            None => Engine::new(config),
        }
        .map_err(|e| format!("engine: {e}"))?,
    );
    let vars = (0..crate::program::VARS)
        .map(|_| engine.new_var())
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("new_var: {e}"))?;
    let shared = Arc::new(Shared {
        mem: (0..crate::program::VARS)
            .map(|_| AtomicU64::new(0))
            .collect(),
        runs: (0..program.stmts.len())
            .map(|_| AtomicU32::new(0))
            .collect(),
        quiesced: AtomicBool::new(false),
        violations: Mutex::new(Vec::new()),
        body_waits: (0..program.stmts.len()).map(|_| Mutex::new(None)).collect(),
        gil: gil.clone(),
    });
    let threads_before = thread_count();
    if let Some(g) = &gil {
        g.lock().acquire();
    }
    let mut runner = Runner {
        program,
        options: options.clone(),
        engine,
        vars,
        shared,
        model: Model::new(),
        checkpoint: Model::new(),
        since: Vec::new(),
        expect: vec![None; program.stmts.len()],
        expect_wait: vec![None; program.stmts.len()],
        guards: Vec::new(),
        in_child: false,
        stats: Stats::default(),
    };
    let result = runner.run_from(0).and_then(|()| runner.finish());
    if let Some(g) = &gil {
        if g.lock().held_by_me() {
            g.lock().release();
        }
    }
    let stats = runner.stats.clone();
    drop(runner);
    // The engine's workers leave after its shutdown, on their own time. A
    // raw fork while they are leaving can leave a child in which no thread
    // can start (see `known_child_hang` in tests/differential.rs); let them
    // go before the next program forks.
    if options.settle_threads {
        wait_threads(threads_before, Duration::from_secs(2));
    }
    result.map(|()| stats)
}

/// Pushes op statement `idx` on `engine`; returns what the push returned
/// and the op as the reference sees it (vars reduced modulo the count).
fn submit(
    engine: &Arc<Engine>,
    vars: &[Var],
    shared: &Arc<Shared>,
    timeout: Duration,
    idx: usize,
    op: &OpStmt,
) -> (Result<u64, Error>, RefKind) {
    let (spec, kind) = spec_of(engine, vars, shared, timeout, idx, op);
    (engine.push(spec), kind)
}

/// Op statement `idx` as a spec for `engine`, and the op as the reference
/// sees it (vars reduced modulo the count).
fn spec_of(
    engine: &Arc<Engine>,
    vars: &[Var],
    shared: &Arc<Shared>,
    timeout: Duration,
    idx: usize,
    op: &OpStmt,
) -> (OpSpec, RefKind) {
    let n = vars.len();
    let reads: Vec<&Var> = op.reads.iter().map(|&v| &vars[v as usize % n]).collect();
    let writes: Vec<&Var> = op.writes.iter().map(|&v| &vars[v as usize % n]).collect();
    let mut b = engine
        .op(crate::program::op_name(idx))
        .reads(&reads)
        .writes(&writes)
        .priority(crate::reference::priority(op.priority));
    if op.host {
        b = b.host();
    }
    if op.run_on_error {
        b = b.run_on_error();
    }
    let body = Body {
        shared: shared.clone(),
        idx,
        reads: op.reads.iter().map(|&v| v as usize % n).collect(),
        writes: op.writes.iter().map(|&v| v as usize % n).collect(),
        outcome: op.outcome,
        host: op.host,
        wait: op.waited_var().map(|v| vars[v as usize % n].clone()),
        engine: Arc::downgrade(engine),
        timeout,
    };
    let spec = match (op.mode, op.outcome) {
        (Mode::Sync, Outcome::Fail) => b.into_try_spec(move || {
            body.enter();
            Err(fail_message(body.idx))
        }),
        (Mode::Sync, _) => b.into_spec(move || body.sync()),
        (Mode::AsyncInline, _) => b.into_async_spec(move |token| body.async_inline(token)),
        (Mode::AsyncThread, _) => b.into_async_spec(move |token| {
            body.enter();
            std::thread::spawn(move || body.async_helper(token));
        }),
    };
    let mut op = op.clone();
    op.reads = op.reads.iter().map(|&v| (v as usize % n) as u8).collect();
    op.writes = op.writes.iter().map(|&v| (v as usize % n) as u8).collect();
    (spec, RefKind::User { idx, op })
}

/// How many threads this process has (0 if unknown).
fn thread_count() -> usize {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("Threads:"))
                .and_then(|n| n.trim().parse().ok())
        })
        .unwrap_or(0)
}

/// Waits (bounded) until the process is back to `n` threads or fewer.
fn wait_threads(n: usize, bound: Duration) {
    let start = std::time::Instant::now();
    while thread_count() > n && start.elapsed() < bound {
        std::thread::sleep(Duration::from_millis(1));
    }
}

struct Runner<'p> {
    program: &'p Program,
    options: Options,
    engine: Arc<Engine>,
    vars: Vec<Var>,
    shared: Arc<Shared>,
    /// The reference now.
    model: Model,
    /// The reference at the last `wait_all` (every op before it complete).
    checkpoint: Model,
    /// Ops accepted since the last `wait_all`, in push order.
    since: Vec<RefOp>,
    expect: Vec<Option<Runs>>,
    /// What each statement's in-body wait must return.
    /// Each statement's op id and what its in-body wait should return.
    expect_wait: Vec<Option<(u64, BodyWait)>>,
    guards: Vec<QuiesceGuard>,
    in_child: bool,
    stats: Stats,
}

impl Runner<'_> {
    fn run_from(&mut self, start: usize) -> Result<(), String> {
        let stmts = &self.program.stmts;
        let mut idx = start;
        while idx < stmts.len() {
            let run_end = (idx..stmts.len())
                .find(|&i| !matches!(stmts[i], Stmt::Op(_)))
                .unwrap_or(stmts.len());
            if self.options.batch && run_end - idx >= 2 {
                self.push_batch(idx..run_end)
                    .map_err(|e| format!("at s{idx}..s{run_end} (one batch): {e}"))?;
                self.check_violations()?;
                idx = run_end;
                continue;
            }
            if self.options.pushers > 1 && run_end - idx >= 2 {
                self.push_concurrently(idx..run_end)
                    .map_err(|e| format!("at s{idx}..s{run_end} (pushed at once): {e}"))?;
                self.check_violations()?;
                idx = run_end;
                continue;
            }
            let stmt = &stmts[idx];
            self.step(idx, stmt)
                .map_err(|e| format!("at s{idx} ({stmt}): {e}"))?;
            self.check_violations()?;
            idx += 1;
        }
        Ok(())
    }

    /// Pushes the op statements `run` from `options.pushers` threads at
    /// once, then records them in the reference in the engine's id order
    /// (refused pushes in any order: the run deletes nothing, so whether a
    /// push is refused does not depend on the order).
    fn push_concurrently(&mut self, run: std::ops::Range<usize>) -> Result<(), String> {
        let pushers = self.options.pushers;
        let stmts = &self.program.stmts;
        let (engine, vars, shared, timeout) = (
            &self.engine,
            &self.vars,
            &self.shared,
            self.options.wait_timeout,
        );
        let start = std::sync::Barrier::new(pushers);
        let mut results: Vec<(usize, Result<u64, Error>, RefKind)> = std::thread::scope(|s| {
            let handles: Vec<_> = (0..pushers)
                .map(|t| {
                    let run = run.clone();
                    let start = &start;
                    s.spawn(move || {
                        start.wait();
                        let first = run.start;
                        run.filter(|i| (i - first) % pushers == t)
                            .filter_map(|idx| match &stmts[idx] {
                                Stmt::Op(op) => {
                                    let (got, kind) =
                                        submit(engine, vars, shared, timeout, idx, op);
                                    Some((idx, got, kind))
                                }
                                _ => None,
                            })
                            .collect::<Vec<_>>()
                    })
                })
                .collect();
            handles
                .into_iter()
                .flat_map(|h| h.join().expect("a pusher panicked"))
                .collect()
        });
        results.sort_by_key(|(idx, got, _)| (got.as_ref().map_or(u64::MAX, |id| *id), *idx));
        for (idx, got, kind) in results {
            self.pushed(got, kind, Some(idx))
                .map_err(|e| format!("s{idx}: {e}"))?;
        }
        Ok(())
    }

    /// Pushes the op statements `run` with one `push_batch`, then records
    /// each result as the single push in program order it must equal.
    fn push_batch(&mut self, run: std::ops::Range<usize>) -> Result<(), String> {
        let stmts = &self.program.stmts;
        let (engine, vars, shared, timeout) = (
            &self.engine,
            &self.vars,
            &self.shared,
            self.options.wait_timeout,
        );
        let (specs, kinds): (Vec<OpSpec>, Vec<(usize, RefKind)>) = run
            .filter_map(|idx| match &stmts[idx] {
                Stmt::Op(op) => {
                    let (spec, kind) = spec_of(engine, vars, shared, timeout, idx, op);
                    Some((spec, (idx, kind)))
                }
                _ => None,
            })
            .unzip();
        let results = engine.push_batch(specs);
        for (got, (idx, kind)) in results.into_iter().zip(kinds) {
            self.pushed(got, kind, Some(idx))
                .map_err(|e| format!("s{idx}: {e}"))?;
        }
        Ok(())
    }

    /// The end of a run: resume, wait for everything, compare, and shut
    /// down (which must cancel nothing).
    fn finish(&mut self) -> Result<(), String> {
        self.resume_all();
        self.wait_all().map_err(|e| format!("at the end: {e}"))?;
        let report = self
            .engine
            .shutdown(self.options.wait_timeout)
            .map_err(|e| format!("shutdown: {e}"))?;
        if !report.cancelled.is_empty() || !report.still_running.is_empty() {
            return Err(format!("shutdown after wait_all: {report:?}"));
        }
        self.check_violations()
    }

    fn check_violations(&self) -> Result<(), String> {
        let v = self.shared.violations.lock().map_err(|e| e.to_string())?;
        if v.is_empty() {
            Ok(())
        } else {
            Err(format!("inside op bodies: {}", v.join("; ")))
        }
    }

    fn quiesced(&self) -> bool {
        !self.guards.is_empty()
    }

    fn step(&mut self, idx: usize, stmt: &Stmt) -> Result<(), String> {
        match stmt {
            Stmt::Op(op) => self.push_op(idx, op),
            Stmt::Delete(v) => {
                let v = *v as usize % self.vars.len();
                let got = self.engine.delete_var(&self.vars[v]);
                self.pushed(got, RefKind::Delete(v), None)
            }
            Stmt::Clear(v) => {
                let v = *v as usize % self.vars.len();
                let got = self.engine.clear_poison(&self.vars[v]);
                self.pushed(got, RefKind::Clear(v), None)
            }
            Stmt::WaitVar(v) if !self.quiesced() => self.wait_var(*v as usize % self.vars.len()),
            Stmt::WaitAll if !self.quiesced() => self.wait_all(),
            Stmt::WaitVar(_) | Stmt::WaitAll => Ok(()),
            Stmt::Quiesce => {
                let guard = self
                    .engine
                    .quiesce(self.options.wait_timeout)
                    .map_err(|e| format!("quiesce: {e}"))?;
                self.guards.push(guard);
                self.shared.quiesced.store(true, Ordering::SeqCst);
                expect_state(&self.engine, State::Quiesced)
            }
            Stmt::Resume => {
                if self.guards.len() == 1 {
                    self.shared.quiesced.store(false, Ordering::SeqCst);
                }
                drop(self.guards.pop());
                let want = if self.quiesced() {
                    State::Quiesced
                } else {
                    State::Running
                };
                expect_state(&self.engine, want)
            }
            Stmt::Fork { drained } => {
                if self.in_child || !self.options.forks {
                    return Ok(());
                }
                // A raw fork while a host worker may hold the test GIL's
                // inner lock could hang the child (FORK-SAFETY.md, L4):
                // with the GIL, every fork is drained.
                let drained = *drained || self.program.gil;
                self.fork(idx, drained)
            }
        }
    }

    /// Compares a push's result with the reference's and records the op.
    fn pushed(
        &mut self,
        got: Result<u64, Error>,
        kind: RefKind,
        idx: Option<usize>,
    ) -> Result<(), String> {
        let want = self.model.push(kind);
        match (got, want) {
            (Ok(id), Ok((op, Predicted { fate, body_wait }))) => {
                if id != op.id {
                    return Err(format!("op id {id}, reference {}", op.id));
                }
                if let Some(i) = idx {
                    self.expect_wait[i] = body_wait.map(|w| (id, w));
                    self.expect[i] = Some(match fate {
                        Fate::Ran => Runs::Once,
                        Fate::Skipped | Fate::Internal => Runs::Never,
                    });
                }
                self.since.push(op);
                self.stats.pushed += 1;
                Ok(())
            }
            (Err(g), Err(w)) if g == w => {
                self.stats.refused += 1;
                Ok(())
            }
            (got, want) => Err(format!(
                "push: engine {got:?}, reference {:?}",
                want.map(|(op, _)| op.id)
            )),
        }
    }

    fn push_op(&mut self, idx: usize, op: &OpStmt) -> Result<(), String> {
        let (got, kind) = submit(
            &self.engine,
            &self.vars,
            &self.shared,
            self.options.wait_timeout,
            idx,
            op,
        );
        self.pushed(got, kind, Some(idx))
    }

    fn wait_var(&mut self, v: usize) -> Result<(), String> {
        let got = self
            .engine
            .wait_for_var_timeout(&self.vars[v], self.options.wait_timeout);
        let want = self.model.wait_var(v);
        if got != want {
            return Err(format!(
                "wait_for_var(v{v}): engine {got:?}, reference {want:?}"
            ));
        }
        self.stats.waits += 1;
        self.compare_var(v, None)
    }

    fn wait_all(&mut self) -> Result<(), String> {
        let got = sorted(self.engine.wait_all_timeout(self.options.wait_timeout));
        let want = self.model.wait_all();
        if got != want {
            return Err(format!("wait_all: engine {got:?}, reference {want:?}"));
        }
        self.stats.waits += 1;
        for v in 0..self.vars.len() {
            self.compare_var(v, None)?;
        }
        self.compare_runs()?;
        self.checkpoint = self.model.clone();
        self.since.clear();
        Ok(())
    }

    /// Compares one var's value, version and poison; `alt` is another
    /// value allowed (a raw fork child's var that an op lost in the fork
    /// may have written before the fork).
    fn compare_var(&mut self, v: usize, alt: Option<u64>) -> Result<(), String> {
        let value = self.shared.mem[v].load(Ordering::SeqCst);
        let want = self.model.vars[v].clone();
        if value != want.value && Some(value) != alt {
            return Err(format!(
                "v{v} value {value:#x}, reference {:#x}{}",
                want.value,
                alt.map(|a| format!(" or {a:#x}")).unwrap_or_default()
            ));
        }
        self.model.vars[v].value = value;
        let version = self.engine.var_version(&self.vars[v]);
        if version != Ok(want.version) {
            return Err(format!(
                "v{v} version {version:?}, reference {}",
                want.version
            ));
        }
        let poison = self.engine.var_poison(&self.vars[v]);
        if poison != Ok(want.poison.clone()) {
            return Err(format!(
                "v{v} poison {poison:?}, reference {:?}",
                want.poison
            ));
        }
        Ok(())
    }

    /// Every body ran as often as the reference says; call when nothing
    /// is pending.
    fn compare_runs(&self) -> Result<(), String> {
        for (i, want) in self.expect.iter().enumerate() {
            let Some(want) = want else { continue };
            let ran = self.shared.runs[i].load(Ordering::SeqCst);
            let ok = match want {
                Runs::Once => ran == 1,
                Runs::Never => ran == 0,
                Runs::AtMostOnce => ran <= 1,
            };
            if !ok {
                return Err(format!("s{i}'s body ran {ran} times, expected {want:?}"));
            }
        }
        for (i, want) in self.expect_wait.iter().enumerate() {
            let Some((id, want)) = want else { continue };
            let got = self.shared.body_waits[i]
                .try_lock()
                .map_err(|e| e.to_string())?
                .clone();
            if !got.as_ref().is_some_and(|g| want.accepts(*id, g)) {
                return Err(format!(
                    "s{i}'s wait_for_var inside its body: {got:?}, reference {want:?}"
                ));
            }
        }
        Ok(())
    }

    fn resume_all(&mut self) {
        self.shared.quiesced.store(false, Ordering::SeqCst);
        while let Some(g) = self.guards.pop() {
            drop(g);
        }
    }

    fn fork(&mut self, idx: usize, drained: bool) -> Result<(), String> {
        let before = self.engine.state();
        let (rd, wr) = nix::unistd::pipe().map_err(|e| format!("pipe: {e}"))?;
        let side = if drained {
            match forksafe::fork_with(self.options.wait_timeout) {
                Ok(Forked::Parent { child, .. }) => Ok(nix::unistd::Pid::from_raw(child)),
                Ok(Forked::Child { drain }) => Err(Some(drain)),
                Err(e) => return Err(format!("fork_with: {e}")),
            }
        } else {
            // SAFETY: the child only touches the engine (which its atfork
            // handlers made consistent), atomics and fresh allocations,
            // reports with write(2) and leaves with _exit.
            match unsafe { nix::unistd::fork() } {
                Ok(nix::unistd::ForkResult::Parent { child }) => Ok(child),
                Ok(nix::unistd::ForkResult::Child) => Err(None),
                Err(e) => return Err(format!("fork: {e}")),
            }
        };
        match side {
            Err(drain) => {
                drop(rd);
                let result = catch_unwind(AssertUnwindSafe(|| self.child(idx, drain)));
                let (code, msg) = match result {
                    Ok(Ok(lost)) => (0, format!("lost={lost}")),
                    Ok(Err(e)) => (1, format!("{e}\n{}\n{}", self.diagnose(), thread_report())),
                    Err(_) => (2, "the child panicked".to_string()),
                };
                let msg: String = msg.chars().take(8000).collect();
                write_fd(wr.as_raw_fd(), &msg);
                exit_now(code)
            }
            Ok(pid) => {
                drop(wr);
                let waited = wait_child(pid, self.options.child_limit);
                let msg = read_pipe(&rd);
                waited.map_err(|e| {
                    format!(
                        "{} fork child: {e}: {msg}",
                        if drained { "drained" } else { "raw" }
                    )
                })?;
                self.stats.forks += 1;
                if let Some(n) = msg
                    .strip_prefix("lost=")
                    .and_then(|n| n.parse::<usize>().ok())
                {
                    self.stats.lost_in_children += n;
                }
                expect_state(&self.engine, before).map_err(|e| format!("parent: {e}"))
            }
        }
    }

    /// What a failing fork child knows about its engine: its fork report
    /// and every op still pending.
    fn diagnose(&self) -> String {
        let report = self.engine.fork_report();
        let pending = match self.engine.wait_all_timeout(Duration::from_millis(200)) {
            Err(Error::Timeout { pending }) => pending
                .iter()
                .map(|i| format!("#{} {}", i.id, i.name))
                .collect::<Vec<_>>()
                .join(", "),
            other => format!("{other:?}"),
        };
        // Can this child start a thread that uses thread-locals at all?
        let (tx, rx) = std::sync::mpsc::channel();
        let spawned = std::thread::Builder::new().spawn(move || {
            let _ = std::thread::current().id();
            let _ = tx.send(());
        });
        let starts = match spawned {
            Ok(_) => rx.recv_timeout(Duration::from_secs(2)).is_ok(),
            Err(_) => false,
        };
        format!(
            "fork report: {report:?}\nstill pending in the child: {pending}\na fresh thread starts and runs in the child: {starts}"
        )
    }

    /// The fork child: compare the inherited state with the reference at
    /// the fork point, then run the rest of the program.
    /// Returns how many ops the child inherited.
    fn child(&mut self, idx: usize, drain: Option<forksafe::DrainReport>) -> Result<usize, String> {
        self.in_child = true;
        let drained = drain.is_some();
        if let Some(d) = &drain {
            if !d.drained() {
                return Err(format!("the drain timed out: {:?}", d.timed_out));
            }
        }
        let report = self
            .engine
            .fork_report()
            .map_err(|e| format!("fork_report: {e}"))?
            .ok_or("no fork report in the child")?;
        if report.carried.is_some() {
            return Err(format!(
                "carried op {:?} (none forked from a body)",
                report.carried
            ));
        }
        // Which ops the child inherited: all pushed since the last wait_all,
        // so the reference knows them.
        let mut lost = BTreeSet::new();
        for info in &report.lost {
            let Some(op) = self.since.iter().find(|o| o.id == info.id) else {
                return Err(format!("lost op {info:?} was not pending at the fork"));
            };
            if op.info() != *info || matches!(op.kind, RefKind::Delete(_)) {
                return Err(format!("lost {info:?}, reference {:?}", op.info()));
            }
            lost.insert(info.id);
        }
        let deletes = self
            .since
            .iter()
            .filter(|o| matches!(o.kind, RefKind::Delete(_)))
            .count();
        if report.deletions > deletes {
            return Err(format!(
                "{} deletions carried out, {deletes} pushed",
                report.deletions
            ));
        }
        // The ops that completed before the fork come before every op they
        // conflict with that did not (I1): no completed op overtook a lost
        // one on a var.
        for (i, x) in self.since.iter().enumerate() {
            if lost.contains(&x.id) || matches!(x.kind, RefKind::Delete(_)) {
                continue;
            }
            if let Some(y) = self.since[..i]
                .iter()
                .find(|y| lost.contains(&y.id) && y.conflicts(x))
            {
                return Err(format!(
                    "op #{} completed before the fork although #{} before it on a shared var did not",
                    x.id, y.id
                ));
            }
        }
        // The reference at the fork point: the completed ops in push order,
        // then the lost ones complete with LostInFork, in id order.
        let mut model = self.checkpoint.clone();
        model.next_op = self.model.next_op;
        for op in self.since.iter().filter(|o| !lost.contains(&o.id)) {
            model.apply(op);
        }
        let mut alt = vec![None; self.vars.len()];
        if !drained {
            // A raw fork may catch an op mid-body: the first lost op on a var
            // may have written it.
            for (v, slot) in alt.iter_mut().enumerate() {
                let first = self
                    .since
                    .iter()
                    .filter(|o| lost.contains(&o.id))
                    .find(|o| o.reads().contains(&v) || o.writes().contains(&v));
                *slot = first.and_then(|o| model.would_write(o, v));
            }
        }
        for op in self.since.iter().filter(|o| lost.contains(&o.id)) {
            model.lose(op);
            if let RefKind::User { idx, .. } = op.kind {
                self.expect_wait[idx] = None;
                self.expect[idx] = Some(if drained {
                    Runs::Never
                } else {
                    Runs::AtMostOnce
                });
            }
        }
        self.stats.lost_in_children += lost.len();
        self.model = model;
        // Quiesces of the parent's epoch are inert here.
        self.shared.quiesced.store(false, Ordering::SeqCst);
        self.guards.clear();
        expect_state(&self.engine, State::Running)?;
        for (v, alt) in alt.into_iter().enumerate() {
            self.compare_var(v, alt)
                .map_err(|e| format!("child at the fork: {e}"))?;
        }
        for v in 0..self.vars.len() {
            let got = self
                .engine
                .wait_for_var_timeout(&self.vars[v], self.options.wait_timeout);
            let want = self.model.wait_var(v);
            if got != want {
                return Err(format!(
                    "child wait_for_var(v{v}): {got:?}, reference {want:?}"
                ));
            }
        }
        self.wait_all()
            .map_err(|e| format!("child at the fork: {e}"))?;
        // The child goes on with the rest of the program (without forking).
        self.run_from(idx + 1).map_err(|e| format!("child: {e}"))?;
        self.finish().map_err(|e| format!("child: {e}"))?;
        Ok(lost.len())
    }
}

/// The threads of this process, with their state and kernel wait channel
/// (for a failing fork child: which threads exist and where they sleep).
fn thread_report() -> String {
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else {
        return String::new();
    };
    let mut out = vec!["threads of the child (name, state, wchan):".to_string()];
    for task in tasks.flatten() {
        let p = task.path();
        let read = |f: &str| std::fs::read_to_string(p.join(f)).unwrap_or_default();
        let stat = read("stat");
        let name = read("comm");
        let state = stat
            .rsplit(')')
            .next()
            .and_then(|s| s.split_whitespace().next())
            .unwrap_or("?")
            .to_string();
        out.push(format!(
            "  {} {} {}",
            name.trim(),
            state,
            read("wchan").trim()
        ));
    }
    out.join("\n")
}

fn expect_state(engine: &Engine, want: State) -> Result<(), String> {
    let got = engine.state();
    if got == want {
        Ok(())
    } else {
        Err(format!("engine state {got:?}, expected {want:?}"))
    }
}

/// `wait_all`'s errors in op-id order (the engine lists them in completion
/// order, which the contract leaves open).
fn sorted(result: Result<(), Error>) -> Result<(), Error> {
    match result {
        Err(Error::OpsFailed(mut errors)) => {
            errors.sort_by_key(|e| e.op().id);
            Err(Error::OpsFailed(errors))
        }
        other => other,
    }
}

/// An op body: what statement `idx` does when it runs.
struct Body {
    shared: Arc<Shared>,
    idx: usize,
    reads: Vec<usize>,
    writes: Vec<usize>,
    outcome: Outcome,
    host: bool,
    /// The var the body waits on, if it waits.
    wait: Option<Var>,
    engine: Weak<Engine>,
    timeout: Duration,
}

impl Body {
    /// Counts the run and checks what must hold whenever a body runs.
    fn enter(&self) {
        let s = &self.shared;
        s.runs[self.idx].fetch_add(1, Ordering::SeqCst);
        if s.quiesced.load(Ordering::SeqCst) {
            s.violation(format!("s{} ran while a quiesce held", self.idx));
        }
        if let (true, Some(gil)) = (self.host, &s.gil) {
            if !gil.lock().held_by_me() {
                s.violation(format!("host op s{} ran without the host lock", self.idx));
            }
        }
        if let (Some(v), Some(engine)) = (&self.wait, self.engine.upgrade()) {
            let got = engine.wait_for_var_timeout(v, self.timeout);
            if let Ok(mut slot) = s.body_waits[self.idx].try_lock() {
                *slot = Some(got);
            }
        }
    }

    /// Writes the op's values (a successful op only).
    fn work(&self) {
        if self.outcome != Outcome::Ok {
            return;
        }
        let mem = &self.shared.mem;
        let read: Vec<u64> = self
            .reads
            .iter()
            .map(|&r| mem[r].load(Ordering::SeqCst))
            .collect();
        for &w in &self.writes {
            let old = mem[w].load(Ordering::SeqCst);
            mem[w].store(mix(self.idx as u64, &read, old), Ordering::SeqCst);
        }
    }

    fn sync(self) {
        self.enter();
        if self.outcome == Outcome::Panic {
            panic_any(panic_message(self.idx));
        }
        self.work();
    }

    fn async_inline(self, token: Token) {
        self.enter();
        self.work();
        match self.outcome {
            Outcome::Ok => {
                self.complete(&token, Ok(()));
                if token.complete(Ok(())) != Err(Error::AlreadyCompleted) {
                    self.shared
                        .violation(format!("s{}: a second completion was accepted", self.idx));
                }
            }
            Outcome::Fail => self.complete(&token, Err(fail_message(self.idx))),
            Outcome::Panic => {
                // The token is dropped while unwinding.
                let _keep = token;
                panic_any(panic_message(self.idx));
            }
        }
    }

    fn async_helper(self, token: Token) {
        if self.shared.quiesced.load(Ordering::SeqCst) {
            self.shared
                .violation(format!("s{}'s helper ran while a quiesce held", self.idx));
        }
        self.work();
        match self.outcome {
            Outcome::Ok => self.complete(&token, Ok(())),
            Outcome::Fail => self.complete(&token, Err(fail_message(self.idx))),
            // A lost callback: the token is dropped unfinished.
            Outcome::Panic => drop(token),
        }
    }

    fn complete(&self, token: &Token, result: Result<(), String>) {
        if let Err(e) = token.complete(result) {
            self.shared
                .violation(format!("s{}: completing its token: {e}", self.idx));
        }
        if !token.is_completed() {
            self.shared
                .violation(format!("s{}: token not completed after complete", self.idx));
        }
    }
}
