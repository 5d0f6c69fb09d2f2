//! The Python exceptions fjall's error kinds become, and fjall's errors classified into
//! those kinds (the kinds, the error type and `detach` are the engines' own, in
//! `crate::errors`).
use pyo3::create_exception;
use pyo3::exceptions::PyException;
use pyo3::prelude::*;

pub use crate::errors::detach;
use crate::errors::{Engine, Kind};

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

/// The fjall engines (2 and 3): their exceptions (see `crate::errors`).
pub struct Fjall;

impl Engine for Fjall {
    const NAME: &'static str = "fjall";

    fn exception(kind: Kind, message: String) -> PyErr {
        match kind {
            Kind::Busy => FjallBusyError::new_err(message),
            Kind::Corrupt => FjallCorruptError::new_err(message),
            Kind::Refused => FjallRefusedError::new_err(message),
            Kind::Unsupported | Kind::Other => FjallError::new_err(message),
        }
    }
}

/// A fjall engine error.
pub type NErr = crate::errors::Error<Fjall>;

impl From<fjall::Error> for NErr {
    fn from(e: fjall::Error) -> NErr {
        match e {
            fjall::Error::Locked => NErr::busy("the database is locked by another process"),
            fjall::Error::Io(io) | fjall::Error::Storage(fjall::LsmError::Io(io)) => {
                NErr::other(io.to_string())
            }
            fjall::Error::Poisoned => {
                NErr::other("the database is poisoned (a write failed before)")
            }
            other => NErr::corrupt(format!("{other:?}")),
        }
    }
}

impl From<fjall2::Error> for NErr {
    fn from(e: fjall2::Error) -> NErr {
        match e {
            fjall2::Error::Io(io) | fjall2::Error::Storage(fjall2::LsmError::Io(io)) => {
                NErr::other(io.to_string())
            }
            fjall2::Error::Poisoned => {
                NErr::other("the keyspace is poisoned (a write failed before)")
            }
            other => NErr::corrupt(format!("{other:?}")),
        }
    }
}
