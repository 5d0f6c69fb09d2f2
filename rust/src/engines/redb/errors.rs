//! The Python exceptions redb's error kinds become (the kinds, the error type and
//! `detach` are the engines' own, in `crate::errors`).
use pyo3::create_exception;
use pyo3::exceptions::PyException;
use pyo3::prelude::*;

pub use crate::errors::detach;
use crate::errors::{Engine, Kind};

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

/// The redb engine: its exceptions (see `crate::errors`).
pub struct Redb;

impl Engine for Redb {
    const NAME: &'static str = "redb";

    fn exception(kind: Kind, message: String) -> PyErr {
        match kind {
            Kind::Busy => RedbBusyError::new_err(message),
            Kind::Corrupt => RedbCorruptError::new_err(message),
            Kind::Unsupported => RedbUnsupportedError::new_err(message),
            Kind::Refused => RedbRefusedError::new_err(message),
            Kind::Other => RedbError::new_err(message),
        }
    }
}

/// A redb engine error.
pub type NErr = crate::errors::Error<Redb>;
