//! The engines' one error type and `detach`, the one way engine work runs without the
//! GIL.
//!
//! An engine declares only what differs: its name and the Python exception each error
//! kind becomes (`Engine`); classifying its driver's errors into kinds stays with it.
//! `detach` releases the GIL and turns a panic in the driver (redb and fjall assert on
//! some damaged files) into a "corrupt" error (exit 4), instead of a Python
//! `PanicException` and a message on stderr.
use std::cell::Cell;
use std::fmt;
use std::marker::PhantomData;
use std::panic::AssertUnwindSafe;
use std::sync::Once;

use pyo3::prelude::*;

/// What went wrong, as the Python side tells errors apart (each is one exception class).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// The store is held by another process.
    Busy,
    /// The store is damaged or truncated.
    Corrupt,
    /// The store's file format is not one this build reads.
    Unsupported,
    /// The writer refuses a name, key or type before writing.
    Refused,
    /// Anything else, I/O included.
    Other,
}

/// A storage engine with native code: its name in messages and its Python exceptions.
pub trait Engine {
    /// The engine's name, as messages spell it (`"redb"`).
    const NAME: &'static str;

    /// The Python exception an error of `kind` becomes.
    fn exception(kind: Kind, message: String) -> PyErr;
}

/// An engine error: its kind and one line for the user.
pub struct Error<E: Engine> {
    pub kind: Kind,
    pub message: String,
    engine: PhantomData<fn() -> E>,
}

impl<E: Engine> Error<E> {
    pub fn new(kind: Kind, message: impl Into<String>) -> Self {
        Error {
            kind,
            message: message.into(),
            engine: PhantomData,
        }
    }

    pub fn busy(message: impl Into<String>) -> Self {
        Self::new(Kind::Busy, message)
    }

    pub fn corrupt(message: impl Into<String>) -> Self {
        Self::new(Kind::Corrupt, message)
    }

    /// A file of format `format`, which this build does not read.
    pub fn unsupported(format: u8) -> Self {
        Self::new(Kind::Unsupported, format!("file format {format}"))
    }

    pub fn refused(message: impl Into<String>) -> Self {
        Self::new(Kind::Refused, message)
    }

    pub fn other(message: impl Into<String>) -> Self {
        Self::new(Kind::Other, message)
    }
}

impl<E: Engine> fmt::Debug for Error<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {:?}: {}", E::NAME, self.kind, self.message)
    }
}

impl<E: Engine> From<Error<E>> for PyErr {
    fn from(e: Error<E>) -> PyErr {
        E::exception(e.kind, e.message)
    }
}

impl<E: Engine> From<std::io::Error> for Error<E> {
    fn from(e: std::io::Error) -> Self {
        Self::other(e.to_string())
    }
}

impl<E: Engine> From<crate::sort::SortError> for Error<E> {
    fn from(e: crate::sort::SortError) -> Self {
        Self::other(e.message)
    }
}

thread_local! {
    /// Set while this thread runs engine work in `detach`: a panic there is reported as
    /// an error, not printed.
    static IN_ENGINE: Cell<bool> = const { Cell::new(false) };
}

/// Run engine work with the GIL released; a panic in it becomes a "corrupt" error
/// naming the engine and the panic's first line.
pub fn detach<E: Engine, T: Send>(
    py: Python<'_>,
    f: impl FnOnce() -> Result<T, Error<E>> + Send,
) -> Result<T, Error<E>> {
    static HOOK: Once = Once::new();
    HOOK.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if !IN_ENGINE.with(|c| c.get()) {
                previous(info);
            }
        }));
    });
    py.detach(|| {
        let outer = IN_ENGINE.with(|c| c.replace(true));
        let out = std::panic::catch_unwind(AssertUnwindSafe(f));
        IN_ENGINE.with(|c| c.set(outer));
        out.unwrap_or_else(|panic| {
            let msg = panic
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_else(|| "a panic".into());
            Err(Error::corrupt(format!(
                "{} stopped on damaged data: {}",
                E::NAME,
                msg.lines().next().unwrap_or("")
            )))
        })
    })
}
