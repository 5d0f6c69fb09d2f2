//! File format 2, through redb 2.6 (a renamed Cargo dependency).
use redb::{Key, Value};
use redb2 as redb;
use std::cmp::Ordering;

use super::overlay::Overlay;

pub type RT<'a> = redb::ReadTransaction;

/// A source opened through a copy-on-write view: this redb version has no
/// read-only open, and opening a file for writing would change its header (and
/// repair it if it was not closed cleanly). Nothing reaches the file.
pub struct SourceDb(#[allow(dead_code)] Box<redb::Database>);

#[derive(Debug)]
struct OverlayBackend(Overlay);

impl redb::StorageBackend for OverlayBackend {
    fn len(&self) -> std::io::Result<u64> {
        self.0.len()
    }
    fn read(&self, offset: u64, len: usize) -> std::io::Result<Vec<u8>> {
        let mut out = vec![0u8; len];
        self.0.read_into(offset, &mut out)?;
        Ok(out)
    }
    fn set_len(&self, len: u64) -> std::io::Result<()> {
        self.0.set_len(len)
    }
    fn sync_data(&self, _eventual: bool) -> std::io::Result<()> {
        Ok(())
    }
    fn write(&self, offset: u64, data: &[u8]) -> std::io::Result<()> {
        self.0.write(offset, data)
    }
}

pub fn open_source(path: &std::path::Path) -> Result<(SourceDb, RT<'static>), NErr> {
    let overlay = Overlay::open(path).map_err(|e| err(redb::Error::Io(e)))?;
    let db = Box::new(
        redb::Builder::new()
            .set_cache_size(super::cache_bytes())
            .create_with_backend(OverlayBackend(overlay))
            .map_err(err)?,
    );
    let txn = db.begin_read().map_err(err)?;
    // SAFETY: the transaction borrows the boxed database, which does not move and
    // outlives it (`Reader` declares the transaction first, so drops it first).
    #[allow(clippy::missing_transmute_annotations, clippy::useless_transmute)]
    let txn: RT<'static> = unsafe { std::mem::transmute(txn) };
    Ok((SourceDb(db), txn))
}

pub fn create_db(path: &std::path::Path) -> Result<redb::Database, NErr> {
    redb::Builder::new()
        .set_cache_size(super::cache_bytes())
        .create(path)
        .map_err(err)
}

/// A new file of format 3 as redb 2.6 writes it on request (its type names and layout).
pub fn create_db_format3(path: &std::path::Path) -> Result<redb::Database, NErr> {
    redb::Builder::new()
        .set_cache_size(super::cache_bytes())
        .create_with_file_format_v3(true)
        .create(path)
        .map_err(err)
}

impl Writer {
    /// Create a file of format 3 through redb 2.6 (see `create_db_format3`).
    pub fn create_format3(path: &std::path::Path) -> Result<Self, NErr> {
        Ok(Writer {
            db: Some(create_db_format3(path)?),
            since_durable: 0,
        })
    }
}

pub fn open_db(path: &std::path::Path) -> Result<redb::Database, NErr> {
    redb::Builder::new()
        .set_cache_size(super::cache_bytes())
        .create(path)
        .map_err(err)
}

pub fn set_durable(txn: &mut redb::WriteTransaction, durable: bool) -> Result<(), NErr> {
    txn.set_durability(if durable {
        redb::Durability::Immediate
    } else {
        redb::Durability::None
    });
    Ok(())
}

/// Two names redb makes with each built-in classification (see `typename.rs`).
fn templates(class: &str) -> Option<(redb::TypeName, &'static str, redb::TypeName, &'static str)> {
    match class {
        "Internal" => Some((
            <u8 as Value>::type_name(),
            "u8",
            <u128 as Value>::type_name(),
            "u128",
        )),
        _ => None,
    }
}

pub fn make_type_name(class: &str, name: &str) -> Result<redb::TypeName, NErr> {
    super::typename::make::<redb::TypeName>(class, name, templates(class), redb::TypeName::new)
}

#[derive(Debug)]
pub struct RawKey;
#[derive(Debug)]
pub struct RawValue;

macro_rules! raw_impl {
    ($t:ident, $name:ident, $width:ident, $order:ident) => {
        impl Value for $t {
            type SelfType<'a>
                = &'a [u8]
            where
                Self: 'a;
            type AsBytes<'a>
                = &'a [u8]
            where
                Self: 'a;
            fn fixed_width() -> Option<usize> {
                SPEC.with(|s| s.borrow().$width)
            }
            fn from_bytes<'a>(data: &'a [u8]) -> &'a [u8]
            where
                Self: 'a,
            {
                data
            }
            fn as_bytes<'a, 'b: 'a>(value: &'a &'b [u8]) -> &'a [u8]
            where
                Self: 'a,
                Self: 'b,
            {
                value
            }
            fn type_name() -> redb::TypeName {
                SPEC.with(|s| s.borrow().$name.clone())
            }
        }
        impl Key for $t {
            fn compare(a: &[u8], b: &[u8]) -> Ordering {
                SPEC.with(|s| compare_with(&s.borrow().$order, a, b))
            }
        }
    };
}
raw_impl!(RawKey, key, key_width, key_order);
raw_impl!(RawValue, value, value_width, value_order);

include!("common.rs");
