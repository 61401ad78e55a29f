//! Typed errors: bad input is an error at the call, never a panic (docs/DESIGN.md,
//! "Bad input gets a clear error, nothing lost").

use crate::op_info::OpInfo;
use crate::sync::Arc;
use std::fmt;
use std::hash::{Hash, Hasher};

/// The error value a body failed with, shared by every copy of the
/// [`OpError`] that carries it (the poison of each var it reaches).
type Source = Arc<Box<dyn std::error::Error + Send + Sync + 'static>>;

/// Why a body failed: its message, and the error value itself when the body
/// returned one (then [`OpError::body_error`] and `source()` give it, with
/// its own source chain). Built from a `String`/`&str` (message only) or
/// from any error with [`BodyError::new`].
///
/// ```
/// use forksafe_core::BodyError;
/// let e = BodyError::new(std::io::Error::other("disk full"));
/// assert_eq!(e.message(), "disk full");
/// assert!(e.error().unwrap().downcast_ref::<std::io::Error>().is_some());
/// let m: BodyError = "no disk".into();
/// assert!(m.error().is_none());
/// ```
#[derive(Clone)]
pub struct BodyError {
    message: String,
    source: Option<Source>,
}

impl BodyError {
    /// A failure carrying `error` (its `Display` is the message).
    pub fn new(error: impl Into<Box<dyn std::error::Error + Send + Sync + 'static>>) -> Self {
        let error = error.into();
        BodyError {
            message: error.to_string(),
            source: Some(Arc::new(error)),
        }
    }

    /// The failure's message.
    pub fn message(&self) -> &str {
        &self.message
    }

    /// The error value, if the body returned one.
    pub fn error(&self) -> Option<&(dyn std::error::Error + Send + Sync + 'static)> {
        self.source.as_deref().map(|b| &**b)
    }
}

impl fmt::Debug for BodyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "BodyError({:?})", self.message)
    }
}

impl From<String> for BodyError {
    fn from(message: String) -> Self {
        BodyError {
            message,
            source: None,
        }
    }
}

impl From<&str> for BodyError {
    fn from(message: &str) -> Self {
        message.to_string().into()
    }
}

/// Why an op did not complete successfully (I7).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum OpErrorKind {
    /// The body returned an error with this message.
    Failed(String),
    /// The body panicked with this message.
    Panicked(String),
    /// The op was pending when the process forked; this is the child's copy,
    /// completed without running (I5).
    LostInFork,
    /// The op was queued when shutdown's deadline passed (I8).
    Cancelled,
    /// An async op's completion token was dropped without completing it.
    TokenDropped,
    /// The op was ready, but its lane had no worker free to run it and the
    /// OS refused to start one (the message says why). Nothing hangs: the
    /// op completes with this error and poisons what it writes (I2, I7).
    WorkerStart(String),
}

/// The error an op raised, naming the op that first raised it. Vars written
/// by that op are poisoned with it, and ops that depend on them pass it on.
/// When the body failed with an error value, `source()` (and
/// [`OpError::body_error`], for downcasting) give that value, the same
/// object in every copy. Equality and hashing compare the op and the kind.
#[derive(Clone)]
pub struct OpError(Box<OpErrorInner>);

#[derive(Clone)]
struct OpErrorInner {
    op: OpInfo,
    kind: OpErrorKind,
    source: Option<Source>,
}

impl PartialEq for OpError {
    fn eq(&self, other: &Self) -> bool {
        self.0.op == other.0.op && self.0.kind == other.0.kind
    }
}

impl Eq for OpError {}

impl Hash for OpError {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.0.op.hash(state);
        self.0.kind.hash(state);
    }
}

impl OpError {
    /// An error raised by `op`.
    pub fn new(op: OpInfo, kind: OpErrorKind) -> Self {
        OpError(Box::new(OpErrorInner {
            op,
            kind,
            source: None,
        }))
    }

    /// The error of `op`'s failed body: kind [`OpErrorKind::Failed`] with
    /// the failure's message, and its error value as the source.
    pub fn failed(op: OpInfo, failure: BodyError) -> Self {
        OpError(Box::new(OpErrorInner {
            op,
            kind: OpErrorKind::Failed(failure.message),
            source: failure.source,
        }))
    }

    /// The error value the body failed with, if it returned one: downcast
    /// it to get the original type back.
    pub fn body_error(&self) -> Option<&(dyn std::error::Error + Send + Sync + 'static)> {
        self.0.source.as_deref().map(|b| &**b)
    }
    /// The op that first raised the error.
    pub fn op(&self) -> &OpInfo {
        &self.0.op
    }
    /// What went wrong.
    pub fn kind(&self) -> &OpErrorKind {
        &self.0.kind
    }
}

impl fmt::Debug for OpError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "OpError({} #{}: {:?})",
            self.0.op.name, self.0.op.id, self.0.kind
        )
    }
}

impl fmt::Display for OpError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let what = match &self.0.kind {
            OpErrorKind::Failed(m) => format!("failed: {m}"),
            OpErrorKind::Panicked(m) => format!("panicked: {m}"),
            OpErrorKind::LostInFork => "was pending at fork; not run in the child".into(),
            OpErrorKind::Cancelled => "was cancelled by shutdown".into(),
            OpErrorKind::TokenDropped => "completion token dropped unfinished".into(),
            OpErrorKind::WorkerStart(m) => format!("had no worker: cannot start one: {m}"),
        };
        write!(f, "op '{}' (#{}) {}", self.0.op.name, self.0.op.id, what)
    }
}

impl std::error::Error for OpError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.0
            .source
            .as_deref()
            .map(|b| &**b as &(dyn std::error::Error + 'static))
    }
}

/// Errors returned by engine calls.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Error {
    /// The var belongs to another engine.
    ForeignVar,
    /// The var was deleted.
    DeletedVar,
    /// The var appears twice in one op (in one list, or in both).
    DuplicateVar,
    /// The op names more than [`crate::MAX_OP_VARS`] vars.
    TooManyVars,
    /// The engine is shutting down or stopped.
    ShutDown,
    /// The pending-op bound is reached (`try_push`).
    Full,
    /// Called from the forking thread between prepare and parent/child.
    ForkInProgress,
    /// A wait inside an op covers an op that cannot complete before the
    /// calling op does: the calling op itself, or an op that waits for it
    /// (queued behind it on a var, or blocked in a wait that does). Waiting
    /// would deadlock, so the wait fails at once (docs/DESIGN.md, "Waiting
    /// inside an op").
    WaitOnSelf {
        /// The op the wait was called from.
        op: Box<OpInfo>,
        /// What the wait covers that cannot complete first (may be `op`).
        on: Box<OpInfo>,
        /// The var waited for; `None` for `wait_all`.
        var: Option<u64>,
    },
    /// The deadline passed; these ops were still pending.
    Timeout {
        /// Ops still pending at the deadline.
        pending: Vec<OpInfo>,
    },
    /// The host bridge interrupted the wait (Ctrl-C).
    Interrupted,
    /// A timeout of zero was given where a positive one is needed.
    ZeroTimeout,
    /// An op was pushed with no body ([`crate::OpSpec::empty`] without
    /// [`crate::OpSpec::payload`]).
    NoPayload,
    /// The var is poisoned by this error (returned until cleared).
    Poisoned(OpError),
    /// Errors first raised since the previous `wait_all`.
    OpsFailed(Vec<OpError>),
    /// The completion token was already completed.
    AlreadyCompleted,
    /// The token or handle belongs to an earlier fork epoch.
    StaleEpoch,
    /// An engine configuration value is out of range.
    InvalidConfig(&'static str),
    /// The operating system refused to start a worker thread (at
    /// `CoreEngine::new`, or the stand-in a wait inside an op needed).
    Spawn(String),
    /// A wait inside an op would block while `limit` other workers of its
    /// lane are blocked in such waits already (`Config::max_stand_ins`).
    StandInLimit {
        /// The lane's cap.
        limit: usize,
    },
    /// The operating system refused to fork.
    ForkFailed(String),
    /// The fork handlers could not be registered (`pthread_atfork`).
    ForkHandlers(String),
    /// The process's default engine has already started; it is never
    /// replaced.
    DefaultEngineStarted,
    /// An op's body accessed a data var its op does not name (or wrote
    /// one its op only reads).
    UndeclaredData,
    /// An op's body borrowed a data var it already borrows in a way that
    /// would alias (a second write, or a read during a write).
    DataBorrowed,
    /// A data var's value cannot be taken out: other handles to it are
    /// alive.
    DataShared,
    /// A scope (`forksafe::Engine::scope`) opened from inside an op of the
    /// same engine: its ops could depend on the calling op, which cannot
    /// complete before the scope returns.
    ScopeInsideOp,
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::ForeignVar => write!(f, "var belongs to another engine"),
            Error::DeletedVar => write!(f, "var was deleted"),
            Error::DuplicateVar => write!(f, "var appears more than once in one op"),
            Error::TooManyVars => write!(f, "op names more than {} vars", crate::MAX_OP_VARS),
            Error::ShutDown => write!(f, "engine is shut down"),
            Error::Full => write!(f, "pending-op bound reached"),
            Error::ForkInProgress => write!(f, "called between fork prepare and parent/child"),
            Error::WaitOnSelf { op, on, var } => {
                let what = match var {
                    Some(v) => format!("var #{v}"),
                    None => "every op pushed before it".to_string(),
                };
                if on.id == op.id {
                    write!(
                        f,
                        "op #{} '{}' waits for {what}, which waits for the op itself",
                        op.id, op.name
                    )
                } else {
                    write!(
                        f,
                        "op #{} '{}' waits for {what}, which includes op #{} '{}' that cannot complete before it",
                        op.id, op.name, on.id, on.name
                    )
                }
            }
            Error::Timeout { pending } => {
                write!(f, "deadline passed with {} ops pending", pending.len())
            }
            Error::Interrupted => write!(f, "wait interrupted by the host"),
            Error::ZeroTimeout => write!(f, "timeout must be positive"),
            Error::NoPayload => write!(f, "op pushed with no body"),
            Error::Poisoned(e) => write!(f, "var poisoned: {e}"),
            Error::OpsFailed(es) => {
                write!(f, "{} op(s) failed", es.len())?;
                for e in es {
                    write!(f, "; {e}")?;
                }
                Ok(())
            }
            Error::AlreadyCompleted => write!(f, "completion token already completed"),
            Error::StaleEpoch => write!(f, "handle belongs to an earlier fork epoch"),
            Error::InvalidConfig(what) => write!(f, "invalid engine config: {what}"),
            Error::Spawn(e) => write!(f, "cannot start a worker thread: {e}"),
            Error::StandInLimit { limit } => write!(
                f,
                "wait inside an op refused: {limit} workers of its lane already wait inside ops"
            ),
            Error::ForkFailed(e) => write!(f, "fork failed: {e}"),
            Error::ForkHandlers(e) => write!(f, "cannot register the fork handlers: {e}"),
            Error::DefaultEngineStarted => write!(f, "the default engine has already started"),
            Error::UndeclaredData => write!(
                f,
                "data var not named by the op (or written but named only as a read)"
            ),
            Error::DataBorrowed => write!(f, "data var already borrowed by this op's body"),
            Error::DataShared => write!(f, "data var still has other handles"),
            Error::ScopeInsideOp => write!(f, "a scope cannot be opened inside an op"),
        }
    }
}

impl std::error::Error for Error {}

/// Result alias for engine calls.
pub type Result<T, E = Error> = std::result::Result<T, E>;
