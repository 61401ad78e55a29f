//! What names an op outside the engine: its lane, its priority band, and
//! the [`OpInfo`] that reports and errors carry. A leaf: errors name ops
//! without depending on the op record.

/// Which worker pool runs an op.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Lane {
    /// Plain Rust work.
    Compute,
    /// Work that calls host code; runs through the [`crate::HostBridge`]
    /// with the host lock taken around it.
    Host,
}

impl Lane {
    pub(crate) const ALL: [Lane; 2] = [Lane::Compute, Lane::Host];
    pub(crate) fn index(self) -> usize {
        match self {
            Lane::Compute => 0,
            Lane::Host => 1,
        }
    }
}

/// Priority bands of a ready queue: FIFO within a band; see
/// [`crate::ready::STARVATION_LIMIT`] for the bound on starving lower bands.
/// Each worker has its own ready queue (a pushed op goes to one by its id),
/// so priority orders the ready ops of one queue: a high op on one worker's
/// queue may wait behind a low op running on another. With one worker per
/// lane the order is the lane's. Priority never reorders ops on one var
/// (I1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, PartialOrd, Ord)]
pub enum Priority {
    /// Dispatched first.
    High,
    /// The default.
    #[default]
    Normal,
    /// Dispatched last, but never starved past the bound.
    Low,
}

impl Priority {
    pub(crate) fn index(self) -> usize {
        match self {
            Priority::High => 0,
            Priority::Normal => 1,
            Priority::Low => 2,
        }
    }
}

/// What identifies an op in reports and errors.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct OpInfo {
    /// Push sequence number, unique per engine.
    pub id: u64,
    /// The name given at push (`"op"` if none).
    pub name: String,
    /// The lane it was pushed to.
    pub lane: Lane,
    /// Its priority band.
    pub priority: Priority,
}
