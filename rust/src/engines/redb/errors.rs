//! The engine's error kinds, the Python exceptions they become, and `detach`: redb
//! work run with the GIL released, its panics on damaged pages turned into errors.
use std::cell::Cell;
use std::panic::AssertUnwindSafe;
use std::sync::Once;

use pyo3::create_exception;
use pyo3::exceptions::PyException;
use pyo3::prelude::*;

create_exception!(
    _native,
    RedbBusyError,
    PyException,
    "The redb file is held by another process."
);
create_exception!(
    _native,
    RedbCorruptError,
    PyException,
    "The redb file is corrupt or truncated."
);
create_exception!(
    _native,
    RedbUnsupportedError,
    PyException,
    "The redb file format is not supported."
);
create_exception!(
    _native,
    RedbRefusedError,
    PyException,
    "The redb writer refuses a table or type."
);
create_exception!(_native, RedbError, PyException, "Any other redb error.");

/// An engine error, classified for the Python side.
#[derive(Debug)]
pub enum NErr {
    Busy(String),
    Corrupt(String),
    Unsupported(u8),
    Refused(String),
    Io(String),
    Other(String),
}

impl From<crate::sort::SortError> for NErr {
    fn from(e: crate::sort::SortError) -> NErr {
        NErr::Io(e.message)
    }
}

impl From<NErr> for PyErr {
    fn from(e: NErr) -> PyErr {
        match e {
            NErr::Busy(m) => RedbBusyError::new_err(m),
            NErr::Corrupt(m) => RedbCorruptError::new_err(m),
            NErr::Unsupported(v) => RedbUnsupportedError::new_err(format!("file format {v}")),
            NErr::Refused(m) => RedbRefusedError::new_err(m),
            NErr::Io(m) => RedbError::new_err(m),
            NErr::Other(m) => RedbError::new_err(m),
        }
    }
}

thread_local! {
    /// Set while this thread runs redb: a panic there is reported as an error, not printed.
    static IN_REDB: Cell<bool> = const { Cell::new(false) };
}

/// Run redb work with the GIL released. redb asserts (panics) on some damaged
/// pages; such a panic becomes a "corrupt" error (exit 4) instead of a Python
/// `PanicException` and a message on stderr, and poisoned locks are recovered.
pub fn detach<T: Send>(
    py: Python<'_>,
    f: impl FnOnce() -> Result<T, NErr> + Send,
) -> Result<T, NErr> {
    static HOOK: Once = Once::new();
    HOOK.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if !IN_REDB.with(|c| c.get()) {
                previous(info);
            }
        }));
    });
    py.detach(|| {
        IN_REDB.with(|c| c.set(true));
        let out = std::panic::catch_unwind(AssertUnwindSafe(f));
        IN_REDB.with(|c| c.set(false));
        out.unwrap_or_else(|panic| {
            let msg = panic
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_else(|| "a panic".into());
            Err(NErr::Corrupt(format!(
                "redb stopped on damaged data: {}",
                msg.lines().next().unwrap_or("")
            )))
        })
    })
}
