//! The engine's error kinds, the Python exceptions they become, and `detach`: fjall
//! work run with the GIL released, a panic in it turned into an error.
use std::cell::Cell;
use std::panic::AssertUnwindSafe;
use std::sync::Once;

use pyo3::create_exception;
use pyo3::exceptions::PyException;
use pyo3::prelude::*;

create_exception!(
    _native,
    FjallBusyError,
    PyException,
    "The fjall store is held by another process."
);
create_exception!(
    _native,
    FjallCorruptError,
    PyException,
    "The fjall store is corrupt or truncated."
);
create_exception!(
    _native,
    FjallRefusedError,
    PyException,
    "The fjall writer refuses a name or key."
);
create_exception!(
    _native,
    FjallError,
    PyException,
    "Any other fjall error (I/O included)."
);

/// An engine error, classified for the Python side.
#[derive(Debug)]
pub enum NErr {
    Busy(String),
    Corrupt(String),
    Refused(String),
    Other(String),
}

impl From<NErr> for PyErr {
    fn from(e: NErr) -> PyErr {
        match e {
            NErr::Busy(m) => FjallBusyError::new_err(m),
            NErr::Corrupt(m) => FjallCorruptError::new_err(m),
            NErr::Refused(m) => FjallRefusedError::new_err(m),
            NErr::Other(m) => FjallError::new_err(m),
        }
    }
}

impl From<std::io::Error> for NErr {
    fn from(e: std::io::Error) -> NErr {
        NErr::Other(e.to_string())
    }
}

impl From<fjall::Error> for NErr {
    fn from(e: fjall::Error) -> NErr {
        match e {
            fjall::Error::Locked => NErr::Busy("the database is locked by another process".into()),
            fjall::Error::Io(io) | fjall::Error::Storage(fjall::LsmError::Io(io)) => {
                NErr::Other(io.to_string())
            }
            fjall::Error::Poisoned => {
                NErr::Other("the database is poisoned (a write failed before)".into())
            }
            other => NErr::Corrupt(format!("{other:?}")),
        }
    }
}

impl From<fjall2::Error> for NErr {
    fn from(e: fjall2::Error) -> NErr {
        match e {
            fjall2::Error::Io(io) | fjall2::Error::Storage(fjall2::LsmError::Io(io)) => {
                NErr::Other(io.to_string())
            }
            fjall2::Error::Poisoned => {
                NErr::Other("the keyspace is poisoned (a write failed before)".into())
            }
            other => NErr::Corrupt(format!("{other:?}")),
        }
    }
}

thread_local! {
    /// Set while this thread runs fjall: a panic there is reported as an error, not printed.
    static IN_FJALL: Cell<bool> = const { Cell::new(false) };
}

/// Run fjall work with the GIL released; a panic (fjall asserts on some damaged
/// files) becomes a "corrupt" error (exit 4) instead of a Python `PanicException`.
pub fn detach<T: Send>(
    py: Python<'_>,
    f: impl FnOnce() -> Result<T, NErr> + Send,
) -> Result<T, NErr> {
    static HOOK: Once = Once::new();
    HOOK.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if !IN_FJALL.with(|c| c.get()) {
                previous(info);
            }
        }));
    });
    py.detach(|| {
        IN_FJALL.with(|c| c.set(true));
        let out = std::panic::catch_unwind(AssertUnwindSafe(f));
        IN_FJALL.with(|c| c.set(false));
        out.unwrap_or_else(|panic| {
            let msg = panic
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_else(|| "a panic".into());
            Err(NErr::Corrupt(format!(
                "fjall stopped on damaged data: {}",
                msg.lines().next().unwrap_or("")
            )))
        })
    })
}
