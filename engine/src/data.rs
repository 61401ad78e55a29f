//! Data vars and values out of ops: a [`Data<T>`] is a var that owns a
//! value; an op names it in its reads or writes as any var, and its body
//! borrows the value through the [`Access`] it is given — `&T` for a var
//! it reads, `&mut T` for one it writes — with no lock and no `unsafe` on
//! the user's side. [`OpHandle`] carries an op's return value out.
//!
//! Why no lock is needed: the access grant (I9, docs/DESIGN.md). A body
//! runs only while its op holds a grant on every var it names, and a var
//! grants a writer alone and readers only alongside readers (I1); the
//! engine orders the value's accesses exactly as it orders the var's ops.
//! [`Access`] hands a borrow only for a var the op names, in the mode it
//! names, and refuses a second borrow that would alias inside one body
//! ([`Error::DataBorrowed`]). The loom and shuttle models check the grant
//! with the same cell type (`forksafe_core::sync::DataCell`) and a broken
//! grant as a negative control (FORK-SAFETY.md, control (n)).
//!
//! Errors and forks follow the var: a body that fails or panics poisons
//! what it writes, and [`Engine::get`] then returns [`Error::Poisoned`]
//! instead of the half-written value; in a fork child, data whose writer
//! was pending at the fork is poisoned with `LostInFork`.

use crate::{Engine, OpBuilder, OpId, Result, Var};
use forksafe_core::sync::{Arc, DataCell, DataMut, DataRef, Handoff};
use forksafe_core::Error;
use smallvec::SmallVec;
use std::cell::{OnceCell, RefCell};
use std::collections::HashMap;

/// A var that owns a value of type `T` (see the module docs). Cheap to
/// clone: clones name the same var and value.
///
/// ```
/// use forksafe::Engine;
/// let engine = Engine::new(Default::default()).unwrap();
/// let xs = engine.data(vec![1.0_f64, 2.0, 3.0]).unwrap();
/// let sum = engine.data(0.0_f64).unwrap();
/// let (x, s) = (xs.clone(), sum.clone());
/// engine.op("sum").reads(&[xs.var()]).writes(&[sum.var()])
///     .run_with(move |acc| {
///         let total = acc.read(&x)?.iter().sum();
///         *acc.write(&s)? = total;
///         Ok::<_, forksafe::Error>(())
///     })
///     .unwrap();
/// assert_eq!(engine.get(&sum).unwrap(), 6.0);
/// ```
///
/// A borrow cannot outlive the body that got it:
///
/// ```compile_fail,E0521
/// # let engine = forksafe::Engine::new(Default::default()).unwrap();
/// let d = engine.data(1_u32).unwrap();
/// let mut kept: Option<&u32> = None;
/// engine.op("leak").reads(&[d.var()]).run_with(|acc| {
///     kept = Some(&*acc.read(&d).unwrap()); // error: borrowed data escapes the closure
/// }).unwrap();
/// ```
///
/// a read borrow cannot write:
///
/// ```compile_fail,E0594
/// # let engine = forksafe::Engine::new(Default::default()).unwrap();
/// let d = engine.data(1_u32).unwrap();
/// let r = d.clone();
/// engine.op("read only").reads(&[d.var()]).run_with(move |acc| {
///     *acc.read(&r).unwrap() = 2; // error: cannot assign through a shared borrow
/// }).unwrap();
/// ```
///
/// and a value that cannot be sent between threads cannot be data:
///
/// ```compile_fail,E0277
/// # let engine = forksafe::Engine::new(Default::default()).unwrap();
/// let d = engine.data(std::rc::Rc::new(1)).unwrap(); // error: `Rc` is not `Send`
/// ```
pub struct Data<T> {
    var: Var,
    cell: Arc<DataCell<T>>,
}

impl<T> Clone for Data<T> {
    fn clone(&self) -> Self {
        Data {
            var: self.var.clone(),
            cell: self.cell.clone(),
        }
    }
}

impl<T> std::fmt::Debug for Data<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Data({:?})", self.var)
    }
}

impl<T> Data<T> {
    /// The var, to name in an op's reads or writes.
    pub fn var(&self) -> &Var {
        &self.var
    }
}

/// What an op's body may borrow: the data vars its op names. Given to
/// the bodies of [`OpBuilder::run_with`] and [`OpBuilder::try_run_with`].
pub struct Access {
    /// The vars the op names, each with whether it writes it (a var is
    /// named once: a push naming one twice is refused).
    vars: SmallVec<[(Var, bool); 2]>,
    /// The named vars by var, whether each is a write: built at the first
    /// look-up of an op that names [`INDEXED_FROM`] vars or more, so a body
    /// that borrows each of many vars does not scan the lists each time.
    index: OnceCell<HashMap<Var, bool>>,
    /// Borrows alive in this body.
    borrowed: RefCell<Borrows>,
}

/// From this many named vars or live borrows on, look-ups use a hash map
/// instead of scanning a list.
const INDEXED_FROM: usize = 16;

/// The borrows alive in one body, per var: a list while short, a map past
/// [`INDEXED_FROM`]. Guards I9 within a body: no exclusive borrow of a
/// var beside any other borrow of it.
enum Borrows {
    Few(SmallVec<[(Var, Count); 4]>),
    Many(HashMap<Var, Count>),
}

/// The live borrows of one var.
#[derive(Debug, Default, Clone, Copy)]
struct Count {
    shared: u32,
    exclusive: bool,
}

impl Borrows {
    /// The count of `var`, made zero if it has none.
    // A `Var` hashes and compares its state's address, which never changes.
    #[allow(clippy::mutable_key_type)]
    fn entry(&mut self, var: &Var) -> &mut Count {
        if let Borrows::Few(list) = self {
            if list.len() >= INDEXED_FROM && !list.iter().any(|(v, _)| v == var) {
                let map = std::mem::take(list).into_iter().collect();
                *self = Borrows::Many(map);
            }
        }
        match self {
            Borrows::Few(list) => {
                let i = match list.iter().position(|(v, _)| v == var) {
                    Some(i) => i,
                    None => {
                        list.push((var.clone(), Count::default()));
                        list.len() - 1
                    }
                };
                &mut list[i].1
            }
            Borrows::Many(map) => map.entry(var.clone()).or_default(),
        }
    }

    /// Forgets `var`'s count once it is zero, so the list stays short.
    fn trim(&mut self, var: &Var) {
        let idle = |c: &Count| c.shared == 0 && !c.exclusive;
        match self {
            Borrows::Few(list) => {
                if let Some(i) = list.iter().position(|(v, c)| v == var && idle(c)) {
                    list.swap_remove(i);
                }
            }
            Borrows::Many(map) => {
                if map.get(var).is_some_and(idle) {
                    map.remove(var);
                }
            }
        }
    }
}

impl std::fmt::Debug for Access {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Access")
            .field("vars", &self.vars)
            .finish_non_exhaustive()
    }
}

/// A shared borrow of a data var's value, for the length of a body.
pub struct Read<'a, T> {
    value: DataRef<'a, T>,
    _borrow: Borrow<'a>,
}

/// The exclusive borrow of a data var's value, for the length of a body.
pub struct Write<'a, T> {
    value: DataMut<'a, T>,
    _borrow: Borrow<'a>,
}

/// One live borrow of [`Access::borrowed`]; given back on drop.
struct Borrow<'a> {
    access: &'a Access,
    var: Var,
    exclusive: bool,
}

impl Drop for Borrow<'_> {
    fn drop(&mut self) {
        let mut b = self.access.borrowed.borrow_mut();
        let count = b.entry(&self.var);
        if self.exclusive {
            count.exclusive = false;
        } else {
            count.shared = count.shared.saturating_sub(1);
        }
        b.trim(&self.var);
    }
}

impl<T> std::ops::Deref for Read<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.value
    }
}

impl<T> std::ops::Deref for Write<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.value
    }
}

impl<T> std::ops::DerefMut for Write<'_, T> {
    fn deref_mut(&mut self) -> &mut T {
        &mut self.value
    }
}

impl Access {
    pub(crate) fn new(vars: SmallVec<[(Var, bool); 2]>) -> Self {
        Access {
            vars,
            index: OnceCell::new(),
            borrowed: RefCell::new(Borrows::Few(SmallVec::new())),
        }
    }

    /// Whether the op names `var`: `Some(true)` as a write, `Some(false)`
    /// as a read.
    // A `Var` hashes and compares its state's address, which never changes.
    #[allow(clippy::mutable_key_type)]
    fn named(&self, var: &Var) -> Option<bool> {
        if self.vars.len() < INDEXED_FROM {
            return self.vars.iter().find(|(v, _)| v == var).map(|(_, w)| *w);
        }
        let index = self
            .index
            .get_or_init(|| self.vars.iter().cloned().collect());
        index.get(var).copied()
    }

    /// Borrows `data`'s value shared: the op must name its var (as a read
    /// or a write; [`Error::UndeclaredData`] otherwise), and this body
    /// must not hold a write borrow of it ([`Error::DataBorrowed`]).
    pub fn read<'a, T>(&'a self, data: &'a Data<T>) -> Result<Read<'a, T>> {
        if self.named(&data.var).is_none() {
            return Err(Error::UndeclaredData);
        }
        let borrow = self.borrow(&data.var, false)?;
        Ok(Read {
            // SAFETY: the op names `data`'s var, so its body runs holding a
            // grant on it (I9), and this body holds no write borrow of it
            // (checked by `borrow`): no write aliases this read.
            value: unsafe { data.cell.read() },
            _borrow: borrow,
        })
    }

    /// Borrows `data`'s value exclusively: the op must name its var as a
    /// write ([`Error::UndeclaredData`] otherwise), and this body must hold
    /// no other borrow of it ([`Error::DataBorrowed`]).
    pub fn write<'a, T>(&'a self, data: &'a Data<T>) -> Result<Write<'a, T>> {
        if self.named(&data.var) != Some(true) {
            return Err(Error::UndeclaredData);
        }
        let borrow = self.borrow(&data.var, true)?;
        Ok(Write {
            // SAFETY: the op writes `data`'s var, so its body runs holding
            // the var's write grant, which no other op shares (I9); and this
            // body holds no other borrow of it (checked by `borrow`).
            value: unsafe { data.cell.write() },
            _borrow: borrow,
        })
    }

    fn borrow(&self, var: &Var, exclusive: bool) -> Result<Borrow<'_>> {
        let mut b = self.borrowed.borrow_mut();
        let count = b.entry(var);
        if count.exclusive || (exclusive && count.shared > 0) {
            b.trim(var);
            return Err(Error::DataBorrowed);
        }
        if exclusive {
            count.exclusive = true;
        } else {
            count.shared += 1;
        }
        Ok(Borrow {
            access: self,
            var: var.clone(),
            exclusive,
        })
    }
}

/// An op pushed with [`OpBuilder::run_with`] or
/// [`OpBuilder::try_run_with`], whose return value [`OpHandle::wait`]
/// gives. It costs one extra var, written by the op and waited on by the
/// handle. Dropping the handle leaves the op as it is.
pub struct OpHandle<'e, T> {
    engine: &'e Engine,
    id: OpId,
    done: Var,
    value: Arc<Handoff<T>>,
}

impl<T> std::fmt::Debug for OpHandle<'_, T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "OpHandle(#{})", self.id)
    }
}

impl<T> OpHandle<'_, T> {
    /// The op's id.
    pub fn id(&self) -> OpId {
        self.id
    }

    /// Waits (host lock released) until the op has completed and returns
    /// what its body returned. An op that did not succeed returns the
    /// error it completed with: [`Error::Poisoned`] with the op's own
    /// error (its body panicked; for [`OpBuilder::try_run_with`], its
    /// `Err` comes back as `Ok(Err(e))` instead, typed), or the error of
    /// the poisoned var it was skipped for, or `LostInFork` in a fork
    /// child; [`Error::ShutDown`] if shutdown cancelled it unrun.
    pub fn wait(self) -> Result<T> {
        // A body that returned put its value before its op completed; the
        // wait's own error (the op's failure poisons `done`) matters only
        // when there is no value.
        let waited = self.engine.wait_for_var(&self.done);
        match (self.value.take(), waited) {
            (Some(v), _) => Ok(v),
            (None, Err(e)) => Err(e),
            (None, Ok(())) => Err(Error::ShutDown),
        }
    }
}

/// A data var's value could not be taken out ([`Engine::into_inner`]):
/// why, and the data var, unchanged.
#[derive(Debug)]
pub struct NotTaken<T> {
    /// Why.
    pub error: Error,
    /// The data var, as it was.
    pub data: Data<T>,
}

impl Engine {
    /// A new data var owning `value` (see [`Data`]).
    pub fn data<T: Send + Sync + 'static>(&self, value: T) -> Result<Data<T>> {
        Ok(Data {
            var: self.new_var()?,
            cell: Arc::new(DataCell::new(value)),
        })
    }

    /// Waits for the writes of `data` pushed before and returns a clone of
    /// its value, read by an op ordered after them (so a later write
    /// cannot race it); [`Error::Poisoned`] if a writer failed.
    ///
    /// ```
    /// # let engine = forksafe::Engine::new(Default::default()).unwrap();
    /// let d = engine.data(String::from("a")).unwrap();
    /// let w = d.clone();
    /// engine.op("append").writes(&[d.var()]).run_with(move |acc| {
    ///     acc.write(&w).map(|mut s| s.push('b'))
    /// }).unwrap();
    /// assert_eq!(engine.get(&d).unwrap(), "ab");
    /// ```
    pub fn get<T: Clone + Send + Sync + 'static>(&self, data: &Data<T>) -> Result<T> {
        self.with(data, T::clone)
    }

    /// Like [`Engine::get`], but runs `f` on the value (inside an op that
    /// reads it) and returns what `f` returns.
    pub fn with<T, R>(&self, data: &Data<T>, f: impl FnOnce(&T) -> R + Send + 'static) -> Result<R>
    where
        T: Send + Sync + 'static,
        R: Send + 'static,
    {
        let d = data.clone();
        self.op("forksafe.get")
            .reads(&[data.var()])
            .run_with(move |acc| acc.read(&d).map(|v| f(&v)))?
            .wait()?
    }

    /// Waits for every op pushed on `data` so far and takes its value out.
    /// [`NotTaken`] gives the data var back if other handles to it are
    /// alive ([`Error::DataShared`]) or the wait fails (a poisoned var:
    /// [`Error::Poisoned`]).
    ///
    /// ```
    /// # let engine = forksafe::Engine::new(Default::default()).unwrap();
    /// let d = engine.data(vec![1]).unwrap();
    /// let w = d.clone();
    /// engine.op("push").writes(&[d.var()]).run_with(move |acc| {
    ///     acc.write(&w).map(|mut v| v.push(2))
    /// }).unwrap();
    /// assert_eq!(engine.into_inner(d).unwrap(), vec![1, 2]);
    /// ```
    pub fn into_inner<T: Send + Sync + 'static>(
        &self,
        data: Data<T>,
    ) -> std::result::Result<T, NotTaken<T>> {
        // A write orders after every op pushed on the var so far, reads
        // included; once it is done, none of them holds the value.
        let waited = self
            .op("forksafe.into_inner")
            .writes(&[data.var()])
            .run_with(|_| ())
            .and_then(|h| h.wait());
        if let Err(error) = waited {
            return Err(NotTaken { error, data });
        }
        let Data { var, cell } = data;
        match Arc::try_unwrap(cell) {
            Ok(cell) => Ok(cell.into_inner()),
            Err(cell) => Err(NotTaken {
                error: Error::DataShared,
                data: Data { var, cell },
            }),
        }
    }
}

impl<'e> OpBuilder<'e> {
    /// Pushes a sync op whose body borrows data vars through [`Access`]
    /// and returns a value, given by [`OpHandle::wait`]. A panic fails the
    /// op and poisons what it writes.
    ///
    /// ```
    /// # let engine = forksafe::Engine::new(Default::default()).unwrap();
    /// let n = engine.data(20_u64).unwrap();
    /// let r = n.clone();
    /// let h = engine.op("double").reads(&[n.var()])
    ///     .run_with(move |acc| acc.read(&r).map(|v| *v * 2)).unwrap();
    /// assert_eq!(h.wait().unwrap(), Ok(40));
    /// ```
    pub fn run_with<T: Send + 'static>(
        self,
        body: impl FnOnce(&Access) -> T + Send + 'static,
    ) -> Result<OpHandle<'e, T>> {
        self.push_with(move |acc| Ok(body(acc)))
    }

    /// Pushes a sync op whose body may fail with a typed error: `Err(e)`
    /// poisons the vars it writes with `e`'s message (so dependent ops are
    /// skipped), and [`OpHandle::wait`] returns `Ok(Err(e))` with `e`
    /// itself.
    ///
    /// ```
    /// # let engine = forksafe::Engine::new(Default::default()).unwrap();
    /// #[derive(Debug, PartialEq)]
    /// struct TooBig(u64);
    /// impl std::fmt::Display for TooBig {
    ///     fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
    ///         write!(f, "{} is too big", self.0)
    ///     }
    /// }
    /// let out = engine.data(0_u64).unwrap();
    /// let h = engine.op("check").writes(&[out.var()])
    ///     .try_run_with(|_| Err::<(), _>(TooBig(7))).unwrap();
    /// assert_eq!(h.wait().unwrap(), Err(TooBig(7)));
    /// assert!(engine.get(&out).is_err(), "what it writes is poisoned");
    /// ```
    pub fn try_run_with<T, E>(
        self,
        body: impl FnOnce(&Access) -> std::result::Result<T, E> + Send + 'static,
    ) -> Result<OpHandle<'e, std::result::Result<T, E>>>
    where
        T: Send + 'static,
        E: std::fmt::Display + Send + 'static,
    {
        self.push_with(move |acc| {
            let out = body(acc);
            let message = out.as_ref().err().map(ToString::to_string);
            match message {
                Some(m) => Err((out, m)),
                None => Ok(out),
            }
        })
    }

    /// Pushes `body` writing one more (hidden) var, which the handle waits
    /// on; `body`'s `Ok` is the value, its `Err` the value and the message
    /// the op fails with.
    fn push_with<V: Send + 'static>(
        self,
        body: impl FnOnce(&Access) -> std::result::Result<V, (V, String)> + Send + 'static,
    ) -> Result<OpHandle<'e, V>> {
        let engine = self.engine();
        let value = Arc::new(Handoff::new());
        let slot = value.clone();
        let (id, done) = self.push_accessing(move |access| {
            let (out, failed) = match body(access) {
                Ok(v) => (v, None),
                Err((v, m)) => (v, Some(m)),
            };
            slot.put(out);
            failed.map_or(Ok(()), Err)
        })?;
        Ok(OpHandle {
            engine,
            id,
            done,
            value,
        })
    }

    /// Pushes a sync op whose body gets the op's [`Access`] (to the vars
    /// named so far) and that also writes a fresh hidden var, which a
    /// waiter waits on for the op's completion; returns the op's id and
    /// that var. `Err(message)` fails the op. Shared by op handles and
    /// scoped ops.
    pub(crate) fn push_accessing(
        self,
        body: impl FnOnce(&Access) -> std::result::Result<(), String> + Send + 'static,
    ) -> Result<(OpId, Var)> {
        let done = self.engine().new_var()?;
        let access = Access::new(self.spec().named_vars().collect());
        let id = self
            .handle_var(done.clone())
            .push_task(move || body(&access))?;
        Ok((id, done))
    }
}
