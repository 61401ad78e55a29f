//! Shared scaffolding of the loom and shuttle models of `forksafe-core`.
//!
//! Core is generic over the op payload, so the models push [`Effect`]s:
//! small cloneable descriptors that compute each written slot from the read
//! slots, check that no conflicting op is in flight (I1), and log that they
//! ran (I2, I5). The [`Oracle`] holding slots and log is plain std data that
//! the checkers do not schedule: it observes, it never synchronises the
//! engine. [`serial`] is the reference: the same program run serially in
//! push order.

use forksafe_core::{BodyError, CompletionToken, Payload};
use std::fmt;
use std::hash::{Hash, Hasher};
use std::sync::{Arc, Mutex};

/// What one op does to the oracle's slots.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Step {
    /// The op's label, unique within a program.
    pub label: u32,
    /// Slots read.
    pub reads: Vec<usize>,
    /// Slots written: each becomes `mix(label, values read, old value)`.
    pub writes: Vec<usize>,
    /// The body returns an error instead of writing.
    pub fail: bool,
}

/// The op payload of the models.
#[derive(Clone)]
pub struct Effect {
    /// What it does.
    pub step: Step,
    /// Where it does it.
    pub oracle: Oracle,
}

impl fmt::Debug for Effect {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Effect({:?})", self.step)
    }
}

// Snapshots are compared by what they would do, not by where they log.
impl PartialEq for Effect {
    fn eq(&self, other: &Self) -> bool {
        self.step == other.step
    }
}
impl Eq for Effect {}
impl Hash for Effect {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.step.hash(state)
    }
}

/// The deterministic value an op writes.
pub fn mix(label: u32, read: &[u64], old: u64) -> u64 {
    let mut h = old.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ u64::from(label).wrapping_add(1);
    for r in read {
        h = h.rotate_left(17) ^ r.wrapping_mul(0xBF58_476D_1CE4_E5B9);
    }
    h
}

#[derive(Debug, Default)]
struct OracleState {
    slots: Vec<u64>,
    /// Labels in the order their bodies ran.
    ran: Vec<u32>,
    /// Per slot: readers and writers in flight.
    readers: Vec<usize>,
    writers: Vec<usize>,
    violations: Vec<String>,
}

/// The observed world of one model run: slot values, which bodies ran, and
/// any I1 violation seen (a write overlapping another use of its slot).
#[derive(Clone, Default)]
pub struct Oracle(Arc<Mutex<OracleState>>);

impl Oracle {
    /// `slots` slots, all 0.
    pub fn new(slots: usize) -> Self {
        let o = Oracle::default();
        {
            let mut s = o.0.lock().unwrap();
            s.slots = vec![0; slots];
            s.readers = vec![0; slots];
            s.writers = vec![0; slots];
        }
        o
    }

    /// An effect of `step` on this oracle.
    pub fn effect(&self, step: Step) -> Effect {
        Effect {
            step,
            oracle: self.clone(),
        }
    }

    /// Current slot values.
    pub fn slots(&self) -> Vec<u64> {
        self.0.lock().unwrap().slots.clone()
    }

    /// Labels of the bodies that ran, in order.
    pub fn ran(&self) -> Vec<u32> {
        self.0.lock().unwrap().ran.clone()
    }

    /// I1 violations seen.
    pub fn violations(&self) -> Vec<String> {
        self.0.lock().unwrap().violations.clone()
    }

    fn begin(&self, step: &Step) {
        let mut s = self.0.lock().unwrap();
        s.ran.push(step.label);
        for &w in &step.writes {
            if s.writers[w] > 0 || s.readers[w] > 0 {
                s.violations.push(format!(
                    "op {} wrote slot {w} while it was in use",
                    step.label
                ));
            }
            s.writers[w] += 1;
        }
        for &r in &step.reads {
            if s.writers[r] > 0 {
                s.violations.push(format!(
                    "op {} read slot {r} while it was written",
                    step.label
                ));
            }
            s.readers[r] += 1;
        }
    }

    fn end(&self, step: &Step) {
        let mut s = self.0.lock().unwrap();
        let read: Vec<u64> = step.reads.iter().map(|&r| s.slots[r]).collect();
        if !step.fail {
            for &w in &step.writes {
                s.slots[w] = mix(step.label, &read, s.slots[w]);
            }
        }
        for &w in &step.writes {
            s.writers[w] -= 1;
        }
        for &r in &step.reads {
            s.readers[r] -= 1;
        }
    }
}

impl Payload for Effect {
    fn run(self, token: Option<CompletionToken<Self>>) -> Result<(), BodyError> {
        self.oracle.begin(&self.step);
        // A scheduling point inside the body, so the checkers can interleave
        // another op here and expose an overlap.
        forksafe_core::sync::spin_step(0);
        self.oracle.end(&self.step);
        let result = if self.step.fail {
            Err(format!("op {} failed", self.step.label))
        } else {
            Ok(())
        };
        match token {
            Some(t) => Ok(t.complete(result).map_err(|e| e.to_string())?),
            None => Ok(result?),
        }
    }
}

/// Counts op bodies in flight (I3: none while a quiesce holds). Plain std
/// data like the [`Oracle`]: it observes, it never synchronises the engine.
#[derive(Clone, Default)]
pub struct Probe(Arc<std::sync::atomic::AtomicUsize>);

impl Probe {
    /// Bodies running now.
    pub fn running(&self) -> usize {
        self.0.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// A body starts.
    pub fn enter(&self) {
        self.0.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    }

    /// A body ends.
    pub fn leave(&self) {
        self.0.fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
    }
}

/// The reference: `steps` run serially in order on `slots` zeroed slots.
pub fn serial(slots: usize, steps: &[Step]) -> Vec<u64> {
    let mut mem = vec![0u64; slots];
    for s in steps {
        let read: Vec<u64> = s.reads.iter().map(|&r| mem[r]).collect();
        if !s.fail {
            for &w in &s.writes {
                mem[w] = mix(s.label, &read, mem[w]);
            }
        }
    }
    mem
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn serial_depends_on_order() {
        let a = Step {
            label: 1,
            reads: vec![],
            writes: vec![0],
            fail: false,
        };
        let b = Step {
            label: 2,
            reads: vec![0],
            writes: vec![0],
            fail: false,
        };
        assert_ne!(serial(1, &[a.clone(), b.clone()]), serial(1, &[b, a]));
    }

    #[test]
    fn oracle_flags_overlapping_writes() {
        let o = Oracle::new(1);
        let a = Step {
            label: 1,
            reads: vec![],
            writes: vec![0],
            fail: false,
        };
        o.begin(&a);
        o.begin(&a);
        assert_eq!(o.violations().len(), 1);
    }
}
