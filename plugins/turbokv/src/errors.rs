//! The binding's error kinds, the Python exceptions they become, and `detach`: TurboKV
//! work run with the GIL released, a panic in it turned into an error.
use std::cell::Cell;
use std::panic::AssertUnwindSafe;
use std::sync::Once;

use pyo3::create_exception;
use pyo3::exceptions::PyException;
use pyo3::prelude::*;
use turbokv::{ScanError, StorageError};

create_exception!(
    _native,
    TurbokvBusyError,
    PyException,
    "The TurboKV store is held by another process."
);
create_exception!(
    _native,
    TurbokvCorruptError,
    PyException,
    "The TurboKV store is corrupt, truncated, or not in statemigrate's layout."
);
create_exception!(
    _native,
    TurbokvRefusedError,
    PyException,
    "The TurboKV writer refuses a name, key or option."
);
create_exception!(
    _native,
    TurbokvError,
    PyException,
    "Any other TurboKV error (I/O included)."
);

/// An engine error, classified for the Python side.
#[derive(Debug)]
pub(crate) enum NErr {
    Busy(String),
    Corrupt(String),
    Refused(String),
    Other(String),
}

impl From<NErr> for PyErr {
    fn from(e: NErr) -> PyErr {
        match e {
            NErr::Busy(m) => TurbokvBusyError::new_err(m),
            NErr::Corrupt(m) => TurbokvCorruptError::new_err(m),
            NErr::Refused(m) => TurbokvRefusedError::new_err(m),
            NErr::Other(m) => TurbokvError::new_err(m),
        }
    }
}

impl From<StorageError> for NErr {
    fn from(e: StorageError) -> NErr {
        let text = e.to_string();
        match e {
            StorageError::DirectoryLocked { .. } => NErr::Busy(text),
            StorageError::Io(_) | StorageError::DirectoryLockIo { .. } => NErr::Other(text),
            // An operating-system error inside a storage error is I/O (a full disk).
            _ if text.contains("os error") => NErr::Other(text),
            _ => NErr::Corrupt(text),
        }
    }
}

impl From<ScanError> for NErr {
    fn from(e: ScanError) -> NErr {
        let text = e.to_string();
        if text.contains("os error") {
            NErr::Other(text)
        } else {
            NErr::Corrupt(text)
        }
    }
}

impl From<std::io::Error> for NErr {
    fn from(e: std::io::Error) -> NErr {
        NErr::Other(e.to_string())
    }
}

thread_local! {
    /// Set while this thread runs TurboKV: a panic there is reported as an error.
    static IN_TURBOKV: Cell<bool> = const { Cell::new(false) };
}

/// Run TurboKV work with the GIL released; a panic becomes a "corrupt" error.
pub(crate) fn detach<T: Send>(
    py: Python<'_>,
    f: impl FnOnce() -> Result<T, NErr> + Send,
) -> PyResult<T> {
    static HOOK: Once = Once::new();
    HOOK.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if !IN_TURBOKV.with(|c| c.get()) {
                previous(info);
            }
        }));
    });
    let out = py.detach(|| {
        IN_TURBOKV.with(|c| c.set(true));
        let out = std::panic::catch_unwind(AssertUnwindSafe(f));
        IN_TURBOKV.with(|c| c.set(false));
        out.unwrap_or_else(|panic| {
            let msg = panic
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_else(|| "a panic".into());
            Err(NErr::Corrupt(format!(
                "TurboKV stopped on damaged data: {}",
                msg.lines().next().unwrap_or("")
            )))
        })
    });
    Ok(out?)
}
