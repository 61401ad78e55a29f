//! Fork participants across real forks (`forksafe::join_fork`,
//! docs/PARTICIPANTS.md), in a `harness = false` binary (libtest's threads
//! could hold locks at a fork).
//!
//! One process joins four participants: one whose prepare panics, one
//! whose prepare sleeps past its bound, one that drains a work gate while
//! another thread has work in flight, and one that is well behaved. Each
//! round forks with a raw `fork()`. The fork must go ahead every time (the
//! watchdog kills a child that hangs); in the child each participant must
//! read what its prepare step did (panicked, overran, prepared), a
//! `ForkLocal` must give the child's own value while the parent's is left
//! alone, and the child must be able to start threads. In the parent,
//! every parent step ran once per fork. `FORKSAFE_ROUNDS` sets the rounds
//! (default 200).

mod support;

use forksafe::{ForkLocal, ForkParticipant, Inherited, PrepareDeadline, PrepareFailure, WorkGate};
use forksafe_testkit::counters::{bump, counters, snapshot, Counters};
use std::sync::Arc;
use std::time::{Duration, Instant};
use support::{fork_raw, wait_child};

const PANICS: usize = 0;
const SLOW: usize = 1;
const GATED: usize = 2;
const NAMES: [&str; 4] = ["panics", "slow", "gated", "quiet"];

struct Participant {
    which: usize,
    parents: Counters,
    gate: Arc<WorkGate>,
}

impl ForkParticipant for Participant {
    fn name(&self) -> &str {
        NAMES[self.which]
    }
    fn prepare(&self, deadline: &PrepareDeadline<'_>) {
        match self.which {
            PANICS => panic!("expected: this participant's prepare step fails"),
            SLOW => std::thread::sleep(Duration::from_millis(20)),
            GATED => {
                self.gate.close_and_wait(deadline);
            }
            _ => {} // the quiet one
        }
    }
    fn parent(&self) {
        if self.which == GATED {
            self.gate.open();
        }
        bump(&self.parents, self.which);
    }
}

fn participants() {
    // Reports with write(2) only; the panics this test raises on purpose stay quiet.
    forksafe_testkit::child::quiet_panics(Some("expected:"));
    let rounds: usize = std::env::var("FORKSAFE_ROUNDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(200);
    let parents = counters(4);
    let gate = Arc::new(WorkGate::new());
    let bounds = [
        Duration::from_secs(5),
        Duration::from_millis(1),
        Duration::from_secs(5),
        Duration::from_secs(5),
    ];
    let joined: Vec<_> = (0..4)
        .map(|which| {
            forksafe::join_fork(
                Box::new(Participant {
                    which,
                    parents: parents.clone(),
                    gate: gate.clone(),
                }),
                bounds[which],
            )
            .expect("join")
        })
        .collect();
    for p in &joined {
        assert_eq!(p.inherited(), Inherited::Fresh);
    }
    let local: ForkLocal<u32> = ForkLocal::new();
    let parent_value = *local
        .get_or_try_init(|| Ok::<_, ()>(std::process::id()))
        .unwrap();

    // Work in flight through the gate, on a thread that keeps going.
    let done = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let worker = {
        let (gate, done) = (gate.clone(), done.clone());
        std::thread::spawn(move || {
            let mut n = 0u64;
            while !done.load(std::sync::atomic::Ordering::Acquire) {
                let _pass = gate.enter();
                n = n.wrapping_add(1);
            }
            n
        })
    };

    let start = Instant::now();
    for round in 0..rounds {
        let pid = fork_raw(|| {
            let expect = [
                Inherited::Unprepared(PrepareFailure::Panicked),
                Inherited::Unprepared(PrepareFailure::Overran),
                Inherited::Prepared,
                Inherited::Prepared,
            ];
            for (p, want) in joined.iter().zip(expect) {
                if p.inherited() != want {
                    return Err(format!("{p:?}: want {want:?}"));
                }
            }
            if gate.in_flight() != 0 {
                return Err("the gate drained, yet work is in flight in the child".into());
            }
            if local.get().is_some() {
                return Err("the child sees the parent's ForkLocal value".into());
            }
            let mine = *local
                .get_or_try_init(|| Ok::<_, ()>(std::process::id()))
                .unwrap();
            if mine == parent_value {
                return Err("the child's ForkLocal value is the parent's".into());
            }
            // The child starts threads (std's thread lock is free).
            std::thread::spawn(|| ())
                .join()
                .map_err(|_| "a thread in the child".to_string())?;
            Ok(String::new())
        })
        .expect("fork");
        wait_child(pid, Duration::from_secs(30)).unwrap_or_else(|e| panic!("round {round}: {e}"));
    }
    done.store(true, std::sync::atomic::Ordering::Release);
    let passes = worker.join().expect("worker");
    assert_eq!(
        snapshot(&parents),
        vec![rounds as u32; 4],
        "every parent step once per fork, the panicking participant's too"
    );
    assert_eq!(local.get(), Some(&parent_value), "the parent keeps its own");
    assert!(passes > 0);
    println!(
        "participants: {rounds} forks with a panicking, an overrunning, a draining and a quiet \
         participant: every child went on and read its participants right ({:.1} s)",
        start.elapsed().as_secs_f64()
    );
}

fn main() {
    forksafe_testkit::harness::main(&[("participants", participants)]);
}
