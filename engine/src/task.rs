//! The op payload of the production engine: a boxed closure.

use forksafe_core::{BodyError, CompletionToken, Payload};

/// A boxed op body, as core's [`Payload`]. Built by the [`crate::OpBuilder`]
/// run methods; exposed for code that pushes a raw [`forksafe_core::OpSpec`].
///
/// ```
/// use forksafe::Task;
/// let task = Task::new(|_token| Ok(()));
/// # let _ = task;
/// ```
pub struct Task(Box<dyn FnOnce(Option<Token>) -> Result<(), BodyError> + Send>);

/// The completion token of an async op ([`crate::OpBuilder::run_async`]):
/// complete it exactly once; dropping it unfinished fails the op.
pub type Token = CompletionToken<Task>;

impl Task {
    /// A payload running `body`; `body` gets a token for async ops.
    pub fn new(body: impl FnOnce(Option<Token>) -> Result<(), BodyError> + Send + 'static) -> Self {
        Task(Box::new(body))
    }
}

impl std::fmt::Debug for Task {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Task(..)")
    }
}

impl Payload for Task {
    fn run(self, token: Option<Token>) -> Result<(), BodyError> {
        (self.0)(token)
    }
}
