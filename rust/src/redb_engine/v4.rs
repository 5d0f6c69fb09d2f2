//! File format 3, through the current redb (4.x).
use redb::{Key, ReadableDatabase, Value};
use std::cmp::Ordering;

use super::overlay::Overlay;

pub type RT<'a> = redb::ReadTransaction;

/// A source: the read-only handle, or (for a file that needs repair, which redb
/// refuses to open read-only) a handle over a copy-on-write view of it.
#[allow(dead_code)] // held for its lifetime only
pub enum SourceDb {
    ReadOnly(redb::ReadOnlyDatabase),
    Overlay(redb::Database),
}

#[derive(Debug)]
struct OverlayBackend(Overlay);

impl redb::StorageBackend for OverlayBackend {
    fn len(&self) -> std::io::Result<u64> {
        self.0.len()
    }
    fn read(&self, offset: u64, out: &mut [u8]) -> std::io::Result<()> {
        self.0.read_into(offset, out)
    }
    fn set_len(&self, len: u64) -> std::io::Result<()> {
        self.0.set_len(len)
    }
    fn sync_data(&self) -> std::io::Result<()> {
        Ok(())
    }
    fn write(&self, offset: u64, data: &[u8]) -> std::io::Result<()> {
        self.0.write(offset, data)
    }
}

pub fn open_source(path: &std::path::Path) -> Result<(SourceDb, RT<'static>), NErr> {
    match redb::Builder::new()
        .set_cache_size(super::cache_bytes())
        .open_read_only(path)
    {
        Ok(db) => {
            let txn = db.begin_read().map_err(err)?;
            Ok((SourceDb::ReadOnly(db), txn))
        }
        Err(redb::DatabaseError::RepairAborted) => {
            let overlay = Overlay::open(path).map_err(|e| err(redb::Error::Io(e)))?;
            let db = redb::Builder::new()
                .set_cache_size(super::cache_bytes())
                .create_with_backend(OverlayBackend(overlay))
                .map_err(err)?;
            let txn = db.begin_read().map_err(err)?;
            Ok((SourceDb::Overlay(db), txn))
        }
        Err(e) => Err(err(e)),
    }
}

pub fn create_db(path: &std::path::Path) -> Result<redb::Database, NErr> {
    redb::Builder::new()
        .set_cache_size(super::cache_bytes())
        .create(path)
        .map_err(err)
}

pub fn open_db(path: &std::path::Path) -> Result<redb::Database, NErr> {
    redb::Builder::new()
        .set_cache_size(super::cache_bytes())
        .open(path)
        .map_err(err)
}

pub fn set_durable(txn: &mut redb::WriteTransaction, durable: bool) -> Result<(), NErr> {
    let d = if durable {
        redb::Durability::Immediate
    } else {
        redb::Durability::None
    };
    txn.set_durability(d)
        .map_err(|e| NErr::Other(e.to_string()))
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
        "Internal3" => Some((
            <(u8, u8) as Value>::type_name(),
            "(u8,u8)",
            <(u8, u16) as Value>::type_name(),
            "(u8,u16)",
        )),
        _ => None,
    }
}

pub fn make_type_name(class: &str, name: &str) -> Result<redb::TypeName, NErr> {
    if class == "Internal2" {
        // redb 3.0-4.1 classified variable-width tuples Internal2; redb 4.x still opens
        // such names but makes Internal3 ones, so the byte is set here (the variant's
        // place in redb's `TypeClassification`: Internal, UserDefined, Internal2, Internal3).
        let t = make_type_name("Internal", name)?;
        let (internal, user) = (<u8 as Value>::type_name(), redb::TypeName::new("u128"));
        return super::typename::reclassify(t, class, 2, (&internal, "u8"), (&user, "u128"));
    }
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
