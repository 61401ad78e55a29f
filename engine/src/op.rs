//! The push API: `engine.op("name").reads(..).writes(..).run(..)`.

use crate::{Engine, Lane, OpId, OpName, Priority, Result, Task, Token, Var};
use forksafe_core::{BodyError, OpSpec};

/// An op being built; finish it with [`OpBuilder::run`],
/// [`OpBuilder::try_run`] or [`OpBuilder::run_async`]. A var may appear
/// once, in one list ([`crate::Error::DuplicateVar`] otherwise).
///
/// ```
/// use forksafe::{Engine, Priority};
/// let engine = Engine::new(Default::default()).unwrap();
/// let (a, b) = (engine.new_var().unwrap(), engine.new_var().unwrap());
/// engine.op("step").reads(&[&a]).writes(&[&b]).priority(Priority::High).run(|| {}).unwrap();
/// engine.op("host step").writes(&[&a]).host().run(|| {}).unwrap();
/// // An async op completes when its token does (here at once; usually
/// // from a callback of some other system).
/// engine.op("async").writes(&[&b]).run_async(|token| {
///     token.complete(Ok(())).unwrap();
/// }).unwrap();
/// engine.wait_all().unwrap();
/// ```
#[must_use = "an op is pushed only by one of the run methods"]
pub struct OpBuilder<'e> {
    engine: &'e Engine,
    /// Every setting of the op: core's spec, its body set by the run
    /// method.
    spec: OpSpec<Task>,
}

impl std::fmt::Debug for OpBuilder<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let vars: Vec<_> = self.spec.named_vars().collect();
        let info = self.spec.info(0);
        f.debug_struct("OpBuilder")
            .field("name", &info.name)
            .field("vars", &vars)
            .field("lane", &info.lane)
            .field("priority", &info.priority)
            .finish()
    }
}

impl<'e> OpBuilder<'e> {
    pub(crate) fn new(engine: &'e Engine, name: OpName) -> Self {
        OpBuilder {
            engine,
            spec: OpSpec::empty().name(name),
        }
    }

    /// Vars the op reads.
    pub fn reads(mut self, vars: &[&Var]) -> Self {
        self.spec = self.spec.reads_vec(vars.iter().map(|v| (*v).clone()));
        self
    }

    /// Vars the op writes (each completed write bumps the var's version).
    pub fn writes(mut self, vars: &[&Var]) -> Self {
        self.spec = self.spec.writes_vec(vars.iter().map(|v| (*v).clone()));
        self
    }

    /// The priority band (default [`Priority::Normal`]): orders the ready ops
    /// of one worker's ready queue (each worker has its own); never reorders
    /// ops on one var.
    pub fn priority(mut self, priority: Priority) -> Self {
        self.spec = self.spec.priority(priority);
        self
    }

    /// Runs the op on the host lane, with the host lock held (through the
    /// engine's bridge).
    pub fn host(self) -> Self {
        self.lane(Lane::Host)
    }

    /// The lane (default [`Lane::Compute`]).
    pub fn lane(mut self, lane: Lane) -> Self {
        self.spec = self.spec.lane(lane);
        self
    }

    /// Runs the op even if a var it touches is poisoned.
    pub fn run_on_error(mut self) -> Self {
        self.spec = self.spec.run_on_error();
        self
    }

    /// Fails with [`crate::Error::Full`] at the engine's pending bound
    /// instead of waiting for room.
    pub fn fail_if_full(mut self) -> Self {
        self.spec = self.spec.fail_if_full();
        self
    }

    /// Pushes a sync op whose body cannot fail (a panic fails it).
    pub fn run(self, body: impl FnOnce() + Send + 'static) -> Result<OpId> {
        let engine = self.engine;
        engine.push(self.into_spec(body))
    }

    /// Pushes a sync op whose body may fail: `Err(e)` poisons the vars it
    /// writes with `e`. `e` is any error (or a `String`/`&str` message); it
    /// keeps its type: the [`crate::OpError`] that waits return has it as
    /// its `source()`, and [`crate::OpError::body_error`] downcasts to it.
    ///
    /// ```
    /// # use forksafe::Error;
    /// # let engine = forksafe::Engine::new(Default::default()).unwrap();
    /// let v = engine.new_var().unwrap();
    /// engine.op("bad").writes(&[&v]).try_run(|| Err(std::io::Error::other("no disk"))).unwrap();
    /// let Err(Error::Poisoned(e)) = engine.wait_for_var(&v) else { panic!() };
    /// let io = e.body_error().and_then(|b| b.downcast_ref::<std::io::Error>());
    /// assert_eq!(io.map(|io| io.to_string()), Some("no disk".to_string()));
    /// ```
    pub fn try_run<E>(
        self,
        body: impl FnOnce() -> std::result::Result<(), E> + Send + 'static,
    ) -> Result<OpId>
    where
        E: Into<Box<dyn std::error::Error + Send + Sync + 'static>>,
    {
        let engine = self.engine;
        engine.push(self.into_try_spec(body))
    }

    /// Pushes an async op: the body gets a [`Token`] and the op completes
    /// when the token is completed (or dropped, which fails it).
    pub fn run_async(self, body: impl FnOnce(Token) + Send + 'static) -> Result<OpId> {
        let engine = self.engine;
        engine.push(self.into_async_spec(body))
    }

    /// The op as a spec of an async op running `body` (as
    /// [`OpBuilder::run_async`] pushes), for a batch push (see
    /// [`OpBuilder::into_spec`]).
    pub fn into_async_spec(self, body: impl FnOnce(Token) + Send + 'static) -> crate::OpSpec {
        self.spec
            .payload(Task::new(move |token| {
                match token {
                    Some(t) => body(t),
                    None => return Err("async op run without a token".into()),
                }
                Ok(())
            }))
            .asynchronous()
    }

    /// The op as a spec running `body` (a sync op whose body cannot fail,
    /// as [`OpBuilder::run`] pushes), for a batch push:
    /// [`forksafe_core::CoreEngine::push_batch`] pushes many specs under
    /// one fork-gate section and shares the ready queues' locks and
    /// wake-ups between them.
    ///
    /// ```
    /// let engine = forksafe::Engine::new(Default::default()).unwrap();
    /// let v = engine.new_var().unwrap();
    /// let specs = (0..100).map(|_| engine.op("step").writes(&[&v]).into_spec(|| {}));
    /// let ids = engine.push_batch(specs);
    /// assert!(ids.iter().all(Result::is_ok));
    /// engine.wait_for_var(&v).unwrap();
    /// assert_eq!(engine.var_version(&v).unwrap(), 100);
    /// ```
    pub fn into_spec(self, body: impl FnOnce() + Send + 'static) -> crate::OpSpec {
        self.spec.payload(Task::new(move |_| {
            body();
            Ok(())
        }))
    }

    /// The op as a spec running `body` (a sync op whose body may fail,
    /// as [`OpBuilder::try_run`] pushes), for a batch push (see
    /// [`OpBuilder::into_spec`]).
    pub fn into_try_spec<E>(
        self,
        body: impl FnOnce() -> std::result::Result<(), E> + Send + 'static,
    ) -> crate::OpSpec
    where
        E: Into<Box<dyn std::error::Error + Send + Sync + 'static>>,
    {
        self.spec
            .payload(Task::new(move |_| body().map_err(BodyError::new)))
    }

    /// The engine the op is for.
    pub(crate) fn engine(&self) -> &'e Engine {
        self.engine
    }

    /// The spec built so far (its settings and named vars).
    pub(crate) fn spec(&self) -> &OpSpec<Task> {
        &self.spec
    }

    /// Also writes `var` for a handle that waits on it; not counted
    /// against [`crate::MAX_OP_VARS`].
    pub(crate) fn handle_var(mut self, var: Var) -> Self {
        self.spec = self.spec.handle_var(var);
        self
    }

    /// Pushes a sync op running `body`; `Err(message)` fails it.
    pub(crate) fn push_task(
        self,
        body: impl FnOnce() -> std::result::Result<(), String> + Send + 'static,
    ) -> Result<OpId> {
        let engine = self.engine;
        engine.push(self.spec.payload(Task::new(move |_| Ok(body()?))))
    }
}
