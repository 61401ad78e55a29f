//! Fork participants, per-epoch values and work gates, driven through a
//! domain's fork steps on real threads (the child side seen as the atfork
//! child handler leaves it: `domain.child()` in the same process).

use forksafe_core::sync::Clock;
use forksafe_core::{
    Error, ForkDomain, ForkLocal, ForkParticipant, GatedLocal, Inherited, PrepareDeadline,
    PrepareFailure, WorkGate,
};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

fn domain() -> &'static ForkDomain {
    Box::leak(Box::new(ForkDomain::new()))
}

/// What a participant's steps did, in order.
#[derive(Default)]
struct Log(Mutex<Vec<String>>);

impl Log {
    fn push(&self, s: String) {
        self.0.lock().unwrap().push(s);
    }
    fn take(&self) -> Vec<String> {
        std::mem::take(&mut self.0.lock().unwrap())
    }
}

enum Behaviour {
    Quick,
    Panics,
    Sleeps(Duration),
    DrainsGate(Arc<WorkGate>),
}

struct Recorder {
    name: String,
    log: Arc<Log>,
    behaviour: Behaviour,
}

impl ForkParticipant for Recorder {
    fn name(&self) -> &str {
        &self.name
    }
    fn prepare(&self, deadline: &PrepareDeadline<'_>) {
        self.log.push(format!("prepare {}", self.name));
        match &self.behaviour {
            Behaviour::Quick => {}
            Behaviour::Panics => panic!("prepare of {} fails", self.name),
            Behaviour::Sleeps(d) => std::thread::sleep(*d),
            Behaviour::DrainsGate(g) => {
                let drained = g.close_and_wait(deadline);
                self.log.push(format!("drained {drained}"));
            }
        }
    }
    fn drain(&self, deadline: &PrepareDeadline<'_>) {
        if let Behaviour::DrainsGate(g) = &self.behaviour {
            let idle = g.wait_idle(deadline);
            self.log.push(format!("idle {idle}"));
        }
    }
    fn parent(&self) {
        if let Behaviour::DrainsGate(g) = &self.behaviour {
            g.open();
        }
        self.log.push(format!("parent {}", self.name));
    }
}

fn recorder(name: &str, log: &Arc<Log>, behaviour: Behaviour) -> Box<Recorder> {
    Box::new(Recorder {
        name: name.into(),
        log: log.clone(),
        behaviour,
    })
}

const BOUND: Duration = Duration::from_millis(200);

/// A domain with a participant named "pool" that drains `gate` in its
/// steps, joined with `bound`: (domain, log, gate, its participation).
fn gated(
    bound: Duration,
) -> (
    &'static ForkDomain,
    Arc<Log>,
    Arc<WorkGate>,
    forksafe_core::Participation,
) {
    let d = domain();
    let log = Arc::new(Log::default());
    let gate = Arc::new(WorkGate::new());
    let p = d
        .join(
            recorder("pool", &log, Behaviour::DrainsGate(gate.clone())),
            bound,
        )
        .unwrap();
    (d, log, gate, p)
}

#[test]
fn prepare_and_parent_run_once_per_fork_in_joining_order() {
    let d = domain();
    let log = Arc::new(Log::default());
    let a = d
        .join(recorder("a", &log, Behaviour::Quick), BOUND)
        .unwrap();
    let b = d
        .join(recorder("b", &log, Behaviour::Quick), BOUND)
        .unwrap();
    assert_eq!(d.participants(), 2);
    d.prepare();
    d.parent();
    assert_eq!(
        log.take(),
        ["prepare a", "prepare b", "parent a", "parent b"]
    );
    assert_eq!(a.inherited(), Inherited::Fresh, "the parent keeps its own");
    b.leave().unwrap();
    d.prepare();
    d.parent();
    assert_eq!(log.take(), ["prepare a", "parent a"], "b left");
    drop(a);
    assert_eq!(d.participants(), 0);
}

#[test]
fn a_child_sees_its_participants_prepared() {
    let d = domain();
    let log = Arc::new(Log::default());
    let p = d
        .join(recorder("p", &log, Behaviour::Quick), BOUND)
        .unwrap();
    d.prepare();
    d.child();
    assert_eq!(p.inherited(), Inherited::Prepared);
    assert_eq!(log.take(), ["prepare p"], "no parent step in the child");
    // The child forks in its turn: the participant takes part again.
    d.prepare();
    d.parent();
    assert_eq!(log.take(), ["prepare p", "parent p"]);
}

#[test]
fn a_panicking_prepare_does_not_stop_the_fork_and_marks_the_child() {
    let d = domain();
    let log = Arc::new(Log::default());
    let bad = d
        .join(recorder("bad", &log, Behaviour::Panics), BOUND)
        .unwrap();
    let good = d
        .join(recorder("good", &log, Behaviour::Quick), BOUND)
        .unwrap();
    d.prepare();
    d.parent();
    assert_eq!(
        log.take(),
        ["prepare bad", "prepare good", "parent bad", "parent good"],
        "the others still prepare; parent runs for the panicked one too"
    );
    d.prepare();
    d.child();
    assert_eq!(
        bad.inherited(),
        Inherited::Unprepared(PrepareFailure::Panicked)
    );
    assert_eq!(good.inherited(), Inherited::Prepared);
}

#[test]
fn a_prepare_past_its_bound_is_marked_overran() {
    let d = domain();
    let log = Arc::new(Log::default());
    let slow = d
        .join(
            recorder("slow", &log, Behaviour::Sleeps(Duration::from_millis(30))),
            Duration::from_millis(1),
        )
        .unwrap();
    d.prepare();
    d.child();
    assert_eq!(
        slow.inherited(),
        Inherited::Unprepared(PrepareFailure::Overran)
    );
}

#[test]
fn a_participant_that_joined_after_the_prepare_steps_is_unprepared_in_the_child() {
    let d = domain();
    let log = Arc::new(Log::default());
    let early = d
        .join(recorder("early", &log, Behaviour::Quick), BOUND)
        .unwrap();
    d.prepare();
    d.parent();
    // Joined at epoch 0 after a prepare: the next child must not trust an
    // outcome written for another fork.
    let late = d
        .join(recorder("late", &log, Behaviour::Quick), BOUND)
        .unwrap();
    d.child();
    assert_eq!(early.inherited(), Inherited::Prepared);
    assert_eq!(
        late.inherited(),
        Inherited::Unprepared(PrepareFailure::NotPrepared)
    );
}

#[test]
fn joining_with_a_zero_bound_is_an_error() {
    let d = domain();
    let log = Arc::new(Log::default());
    let r = d.join(recorder("z", &log, Behaviour::Quick), Duration::ZERO);
    assert_eq!(r.err(), Some(Error::ZeroTimeout));
    assert_eq!(d.participants(), 0);
}

#[test]
fn a_work_gate_holds_new_work_and_drains_in_flight_work_before_the_fork() {
    let (d, log, gate, _p) = gated(Duration::from_secs(30));
    // Work in flight for 50 ms on another thread.
    let held = Arc::new(AtomicUsize::new(0));
    let worker = {
        let (gate, held) = (gate.clone(), held.clone());
        std::thread::spawn(move || {
            let _pass = gate.enter();
            held.store(1, Ordering::SeqCst);
            std::thread::sleep(Duration::from_millis(50));
            held.store(2, Ordering::SeqCst);
        })
    };
    while held.load(Ordering::SeqCst) == 0 {
        std::thread::yield_now();
    }
    d.prepare();
    assert_eq!(held.load(Ordering::SeqCst), 2, "prepare waited for it");
    assert!(gate.is_closed());
    // New work waits while the gate is closed.
    let entered = Arc::new(AtomicUsize::new(0));
    let late = {
        let (gate, entered) = (gate.clone(), entered.clone());
        std::thread::spawn(move || {
            let _pass = gate.enter();
            entered.store(1, Ordering::SeqCst);
        })
    };
    std::thread::sleep(Duration::from_millis(20));
    assert_eq!(entered.load(Ordering::SeqCst), 0, "held at the closed gate");
    d.parent();
    late.join().unwrap();
    worker.join().unwrap();
    assert_eq!(entered.load(Ordering::SeqCst), 1);
    assert!(!gate.is_closed());
    assert_eq!(log.take(), ["prepare pool", "drained true", "parent pool"]);
}

#[test]
fn a_work_gate_that_does_not_drain_in_time_lets_the_fork_go_and_marks_it() {
    let (d, log, gate, p) = gated(Duration::from_millis(5));
    let pass = gate.enter(); // never ends before the fork
    d.prepare();
    d.child();
    assert_eq!(
        p.inherited(),
        Inherited::Unprepared(PrepareFailure::Overran)
    );
    assert_eq!(log.take(), ["prepare pool", "drained false"]);
    drop(pass);
}

#[test]
fn a_fork_local_value_is_rebuilt_once_in_a_child_and_the_parents_is_not_dropped() {
    struct Counted(Arc<AtomicUsize>);
    impl Drop for Counted {
        fn drop(&mut self) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }
    let d = domain();
    let drops = Arc::new(AtomicUsize::new(0));
    let built = AtomicUsize::new(0);
    let local = ForkLocal::new(d);
    let build = || {
        built.fetch_add(1, Ordering::SeqCst);
        Ok::<_, ()>(Counted(drops.clone()))
    };
    let parent = local.get_or_try_init(build).unwrap() as *const Counted;
    assert_eq!(local.get_or_try_init(build).unwrap() as *const _, parent);
    assert_eq!(built.load(Ordering::SeqCst), 1);
    d.prepare();
    d.child();
    assert!(local.get().is_none());
    let child = local.get_or_try_init(build).unwrap() as *const Counted;
    assert_ne!(child, parent);
    assert_eq!(local.get_or_try_init(build).unwrap() as *const _, child);
    assert_eq!(built.load(Ordering::SeqCst), 2);
    assert_eq!(
        drops.load(Ordering::SeqCst),
        0,
        "the parent's is left alone"
    );
    drop(local);
    assert_eq!(
        drops.load(Ordering::SeqCst),
        1,
        "the child's own is dropped"
    );
    // An init error builds nothing.
    let empty: ForkLocal<Counted> = ForkLocal::new(d);
    assert_eq!(empty.get_or_try_init(|| Err("no")).err(), Some("no"));
    assert!(empty.get().is_none());
}

#[test]
fn racing_builders_agree_on_one_value() {
    let d = domain();
    let local = Arc::new(ForkLocal::new(d));
    let handles: Vec<_> = (0..4)
        .map(|i| {
            let local = local.clone();
            std::thread::spawn(move || *local.get_or_try_init(|| Ok::<_, ()>(i)).unwrap() as usize)
        })
        .collect();
    let seen: Vec<usize> = handles.into_iter().map(|h| h.join().unwrap()).collect();
    assert!(seen.iter().all(|&v| v == seen[0]), "{seen:?}");
}

#[test]
fn drain_steps_wait_for_work_in_flight_without_holding_new_work() {
    let (d, log, gate, _p) = gated(BOUND);
    let _q = d
        .join(recorder("quiet", &log, Behaviour::Quick), BOUND)
        .unwrap();
    assert_eq!(
        d.drain_participants(Duration::ZERO),
        Err(Error::ZeroTimeout)
    );
    assert_eq!(d.drain_participants(BOUND), Ok(true));
    assert_eq!(log.take(), ["idle true"]);
    let pass = gate.enter();
    assert_eq!(d.drain_participants(Duration::from_millis(5)), Ok(false));
    assert!(!gate.is_closed(), "a drain holds no new work");
    let _second = gate.enter();
    drop(pass);
    assert_eq!(log.take(), ["idle false"]);
}

/// A `GatedLocal`'s steps, driven by hand: a use holds a pass that prepare
/// and drain wait for; prepare then holds new uses until parent; a value is
/// built inside a pass, once per process, and a child builds its own.
#[test]
fn a_gated_local_holds_its_uses_across_the_fork_steps() {
    let d = domain();
    let local: Arc<GatedLocal<(u64, AtomicUsize)>> = Arc::new(GatedLocal::new(d));
    let clock = Clock::new();
    let soon = || PrepareDeadline::after(&clock, Duration::from_millis(20));
    let later = || PrepareDeadline::after(&clock, Duration::from_secs(30));
    // Nothing built: every step has nothing to wait for.
    assert!(local.get().is_none());
    assert!(local.prepare(&soon()));
    local.parent();
    let build = || Ok::<_, ()>((d.epoch(), AtomicUsize::new(0)));
    assert_eq!(local.get_or_try_init(build).unwrap().0, 0);
    assert_eq!(local.in_flight(), 0);
    // A use in flight on another thread.
    let (started, release) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let user = {
        let (local, started, release) = (local.clone(), started.clone(), release.clone());
        std::thread::spawn(move || {
            local
                .with(build, |v| {
                    started.store(1, Ordering::SeqCst);
                    while release.load(Ordering::SeqCst) == 0 {
                        std::thread::yield_now();
                    }
                    v.1.fetch_add(1, Ordering::SeqCst);
                })
                .unwrap();
        })
    };
    while started.load(Ordering::SeqCst) == 0 {
        std::thread::yield_now();
    }
    assert_eq!(local.in_flight(), 1);
    assert!(
        !local.drain(&soon()),
        "drain waits for the use in flight, bounded"
    );
    assert!(
        !local.prepare(&soon()),
        "prepare reports the use still in flight"
    );
    release.store(1, Ordering::SeqCst);
    user.join().unwrap();
    assert!(local.prepare(&later()));
    // Closed: a new use waits for the parent step.
    let entered = Arc::new(AtomicUsize::new(0));
    let late = {
        let (local, entered) = (local.clone(), entered.clone());
        std::thread::spawn(move || {
            local
                .with(build, |_| entered.store(1, Ordering::SeqCst))
                .unwrap();
        })
    };
    std::thread::sleep(Duration::from_millis(20));
    assert_eq!(entered.load(Ordering::SeqCst), 0, "held while prepared");
    local.parent();
    late.join().unwrap();
    assert_eq!(entered.load(Ordering::SeqCst), 1);
    assert!(local.drain(&later()));
    assert_eq!(local.get().unwrap().1.load(Ordering::SeqCst), 1);
    // A child builds its own value; an error builds nothing.
    d.prepare();
    d.child();
    assert!(local.get().is_none());
    assert_eq!(
        local.with(|| Err::<(u64, AtomicUsize), _>("no"), |_| ()),
        Err("no")
    );
    assert!(local.get().is_none());
    assert_eq!(local.with(build, |v| v.0).unwrap(), 1);
    assert_eq!(
        format!("{local:?}"),
        "GatedLocal { built_here: true }",
        "Debug says whether this process built its value"
    );
    // At exit: closed for good, waiting for the uses in flight, bounded.
    let (started, release) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let user = {
        let (local, started, release) = (local.clone(), started.clone(), release.clone());
        std::thread::spawn(move || {
            local
                .with(build, |_| {
                    started.store(1, Ordering::SeqCst);
                    while release.load(Ordering::SeqCst) == 0 {
                        std::thread::yield_now();
                    }
                })
                .unwrap();
        })
    };
    while started.load(Ordering::SeqCst) == 0 {
        std::thread::yield_now();
    }
    assert!(
        !local.close_for_exit(&soon()),
        "a use still in flight at the deadline"
    );
    release.store(1, Ordering::SeqCst);
    user.join().unwrap();
    assert!(local.close_for_exit(&soon()));
}
