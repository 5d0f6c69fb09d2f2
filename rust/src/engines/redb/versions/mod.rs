//! One binding of the redb crate per file format: format 1 through redb 1.5, format 2
//! through redb 2.6, format 3 through redb 4.x (renamed Cargo dependencies). The three
//! crates have the same API shape, so `binding!` writes each module from the same code
//! (the shims below, and `spec.rs`, `snapshot.rs` and `writer.rs`, compiled once per
//! version). What really differs is spelt out where each module invokes it:
//!
//! - the names of the key and value traits (`RedbKey`/`RedbValue` in redb 1.5), and
//!   whether a read transaction borrows its database (redb 1.5);
//! - how a storage backend reads a page and syncs (redb 4.x reads into a buffer);
//! - how a source is opened: redb 1.5 and 2.6 have no read-only open, so always through
//!   a copy-on-write view; redb 4.x opens read-only and uses the view only for a file
//!   that needs repair (which it refuses to open read-only);
//! - how an existing file is opened for writing (`create` before 4.x, `open` in 4.x);
//! - whether setting durability can fail (redb 4.x: see `Applied`);
//! - which type-name classifications the version makes (redb 4.x: `Internal3` too, and
//!   `Internal2` by re-classifying an `Internal` name);
//! - redb 2.6 alone writes a format-3 file on request (`Writer::create_format3`).
use std::fmt::Display;

use super::desc::{OwnedRec, PairSink, Pairs, RecordSink, TableDesc, TypeDesc};
use super::errors::NErr;
use super::overlay::Overlay;
use super::read::{Orders, Snapshot};
use super::typename;
use super::types::TypeExpr;
use super::write::TableKind;
use crate::batch::{Limits, Window};

#[cfg(test)]
mod pins;

/// redb's page cache per open file (its default is 1 GiB, which a long copy fills:
/// memory would grow with the store). Reads and writes go through batches of
/// bounded size, so a small cache costs little.
const CACHE_BYTES: usize = 32 << 20;

/// The cache size: `CACHE_BYTES`, or `STATEMIGRATE_REDB_CACHE_BYTES` (to measure its cost).
fn cache_bytes() -> usize {
    std::env::var("STATEMIGRATE_REDB_CACHE_BYTES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(CACHE_BYTES)
}

/// What setting a transaction's durability returns: nothing before redb 4.x, a
/// `Result` in 4.x (it refuses some changes inside a transaction).
trait Applied {
    fn applied(self) -> Result<(), NErr>;
}

impl Applied for () {
    fn applied(self) -> Result<(), NErr> {
        Ok(())
    }
}

impl<E: Display> Applied for Result<(), E> {
    fn applied(self) -> Result<(), NErr> {
        self.map_err(|e| NErr::other(e.to_string()))
    }
}

/// The body of a version's module; its arguments are what differs (see the module doc).
macro_rules! binding {
    (
        storage: $storage:ident,
        source: $source:ident,
        open_existing: $open:ident,
        layout: $layout:expr,
        builtin: [$($builtin:ty),* $(,)?],
        templates: { $($class:literal => ($a:ty, $an:literal, $b:ty, $bn:literal)),* $(,)? },
        append: $append:ident,
        $(reclassify: $reclassify:ident,)?
    ) => {
        use std::cmp::Ordering;

        use super::*;

        #[derive(Debug)]
        struct OverlayBackend(Overlay);

        impl redb::StorageBackend for OverlayBackend {
            fn len(&self) -> std::io::Result<u64> {
                self.0.len()
            }
            fn set_len(&self, len: u64) -> std::io::Result<()> {
                self.0.set_len(len)
            }
            fn write(&self, offset: u64, data: &[u8]) -> std::io::Result<()> {
                self.0.write(offset, data)
            }
            binding!(@storage $storage);
        }

        /// A database over a copy-on-write view of the file at `path`: redb may write
        /// (a header, a repair), but nothing reaches the file.
        fn overlay_db(path: &std::path::Path) -> Result<redb::Database, NErr> {
            let overlay = Overlay::open(path).map_err(|e| err(redb::Error::Io(e)))?;
            redb::Builder::new()
                .set_cache_size(cache_bytes())
                .create_with_backend(OverlayBackend(overlay))
                .map_err(err)
        }

        binding!(@source $source);
        binding!(@append $append);

        pub fn create_db(path: &std::path::Path) -> Result<redb::Database, NErr> {
            redb::Builder::new()
                .set_cache_size(cache_bytes())
                .create(path)
                .map_err(err)
        }

        pub fn open_db(path: &std::path::Path) -> Result<redb::Database, NErr> {
            redb::Builder::new()
                .set_cache_size(cache_bytes())
                .$open(path)
                .map_err(err)
        }

        /// A byte copy of a redb file made a file of this version's own again: opened
        /// for writing (redb repairs the copy of a file that was not closed cleanly),
        /// its persistent savepoints dropped (a convert carries none). Returned open, for
        /// a caller with more to do before the clean close.
        pub fn settle_copy(path: &std::path::Path) -> Result<redb::Database, NErr> {
            let db = open_db(path)?;
            let txn = db.begin_write().map_err(err)?;
            let ids: Vec<u64> = txn.list_persistent_savepoints().map_err(err)?.collect();
            if ids.is_empty() {
                txn.abort().map_err(err)?;
            } else {
                for id in ids {
                    txn.delete_persistent_savepoint(id).map_err(err)?;
                }
                txn.commit().map_err(err)?;
            }
            Ok(db)
        }

        pub fn set_durable(txn: &mut redb::WriteTransaction, durable: bool) -> Result<(), NErr> {
            txn.set_durability(if durable {
                redb::Durability::Immediate
            } else {
                redb::Durability::None
            })
            .applied()
        }

        /// Where this redb version keeps a type name's parts (see `typename.rs`).
        pub const LAYOUT: typename::Layout = $layout;

        // A redb whose `TypeName` changed size is not the one measured: this fails to build.
        const _: () = assert!(
            std::mem::size_of::<redb::TypeName>() == LAYOUT.words * std::mem::size_of::<usize>(),
            "redb's TypeName changed size: measure its layout and pin it again (versions/mod.rs)"
        );

        /// The name of the built-in type that this redb version names `name` with
        /// classification `class`, made by redb itself (no rebuilding): the names of
        /// statemigrate's own layout and of the leaf types.
        fn builtin(class: &str, name: &str) -> Option<redb::TypeName> {
            let want = (class.to_string(), name.to_string());
            [$(<$builtin as Value>::type_name()),*]
                .into_iter()
                .find(|t| typename::parts(t) == want)
        }

        /// Two names redb makes with each built-in classification (see `typename.rs`).
        fn templates(
            class: &str,
        ) -> Option<(redb::TypeName, &'static str, redb::TypeName, &'static str)> {
            match class {
                $($class => Some((
                    <$a as Value>::type_name(),
                    $an,
                    <$b as Value>::type_name(),
                    $bn,
                )),)*
                _ => None,
            }
        }

        /// The type name of classification `class` named `name`: redb's own where it
        /// makes it (`TypeName::new`, `builtin`), else rebuilt over `LAYOUT`.
        pub fn make_type_name(class: &str, name: &str) -> Result<redb::TypeName, NErr> {
            if let Some(t) = builtin(class, name) {
                return Ok(t);
            }
            $(if let Some(t) = $reclassify(class, name) {
                return t;
            })?
            typename::make::<redb::TypeName>(
                class,
                name,
                templates(class),
                redb::TypeName::new,
                &LAYOUT,
            )
        }

        #[derive(Debug)]
        pub struct RawKey;
        #[derive(Debug)]
        pub struct RawValue;

        binding!(@raw RawKey, key, key_width, key_order);
        binding!(@raw RawValue, value, value_width, value_order);

        include!("spec.rs");
        include!("snapshot.rs");
        include!("writer.rs");

        /// Type names made here, written to a real file and read back through redb (the
        /// layout pins' tests, `pins.rs`).
        #[cfg(test)]
        pub mod written {
            use super::*;
            include!("written.rs");
        }
    };

    // The storage backend's page read and sync, as redb before 4.x declares them.
    (@storage before_4) => {
        fn read(&self, offset: u64, len: usize) -> std::io::Result<Vec<u8>> {
            let mut out = vec![0u8; len];
            self.0.read_into(offset, &mut out)?;
            Ok(out)
        }
        fn sync_data(&self, _eventual: bool) -> std::io::Result<()> {
            Ok(())
        }
    };
    // ... and as redb 4.x declares them (it reads into the caller's buffer).
    (@storage redb_4) => {
        fn read(&self, offset: u64, out: &mut [u8]) -> std::io::Result<()> {
            self.0.read_into(offset, out)
        }
        fn sync_data(&self) -> std::io::Result<()> {
            Ok(())
        }
    };

    // A source always opened through a copy-on-write view: this redb version has no
    // read-only open, and opening a file for writing would change its header (and
    // repair it if it was not closed cleanly). Nothing reaches the file.
    (@source overlay) => {
        pub struct SourceDb(#[allow(dead_code)] Box<redb::Database>);

        pub fn open_source(path: &std::path::Path) -> Result<(SourceDb, RT<'static>), NErr> {
            let db = Box::new(overlay_db(path)?);
            let txn = db.begin_read().map_err(err)?;
            // SAFETY: the transaction borrows the boxed database, which does not move and
            // outlives it (`Reader` declares the transaction first, so drops it first).
            #[allow(clippy::missing_transmute_annotations, clippy::useless_transmute)]
            let txn: RT<'static> = unsafe { std::mem::transmute(txn) };
            Ok((SourceDb(db), txn))
        }
    };
    // The version's module opens its sources itself.
    (@source own) => {};

    // No bulk path before redb 4.x: every record goes through `Table::insert`.
    (@append insert) => {
        fn append_plain(
            _t: &mut redb::Table<&[u8], &[u8]>,
            _recs: &[(&[u8], &[u8], u64)],
        ) -> Result<bool, NErr> {
            Ok(false)
        }
        fn append_versioned(
            _t: &mut redb::Table<&[u8], (u64, &[u8])>,
            _recs: &[(&[u8], &[u8], u64)],
        ) -> Result<bool, NErr> {
            Ok(false)
        }
    };
    // The version's module appends through its own cursor (redb 4.x).
    (@append own) => {};

    // A raw wrapper type: it impersonates the stored type set in `SPEC` (see `spec.rs`).
    (@raw $t:ident, $name:ident, $width:ident, $order:ident) => {
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

/// File format 1, through redb 1.5 (read only: its writer half is compiled but unused).
#[allow(dead_code)]
pub mod v1 {
    use redb::{RedbKey as Key, RedbValue as Value};
    use redb1 as redb;

    /// A read transaction borrows its database in redb 1.x.
    pub type RT<'a> = redb::ReadTransaction<'a>;

    binding! {
        storage: before_4,
        source: overlay,
        open_existing: create,
        layout: typename::Layout {
            version: "1.5",
            words: 4,
            name_word: 0,
            class_byte: None,
        },
        builtin: [u8, u16, u32, u64, u128, i8, i16, i32, i64, i128, bool, char, (), f32, f64, &str, &[u8], (u64, &[u8])],
        templates: { "Internal" => (u8, "u8", u128, "u128") },
        append: insert,
    }
}

/// File format 2, through redb 2.6 (and format 3 as redb 2.6 writes it on request).
pub mod v2 {
    use redb::{Key, ReadableTableMetadata, Value};
    use redb2 as redb;

    pub type RT<'a> = redb::ReadTransaction;

    binding! {
        storage: before_4,
        source: overlay,
        open_existing: create,
        layout: typename::Layout {
            version: "2.6",
            words: 4,
            name_word: 0,
            class_byte: None,
        },
        builtin: [u8, u16, u32, u64, u128, i8, i16, i32, i64, i128, bool, char, (), f32, f64, &str, String, &[u8], (u64, &[u8])],
        templates: { "Internal" => (u8, "u8", u128, "u128") },
        append: insert,
    }

    impl Writer {
        /// Create a file of format 3 as redb 2.6 writes it on request (its type names
        /// and layout), which redb 2.6 still opens.
        pub fn create_format3(path: &std::path::Path) -> Result<Self, NErr> {
            let db = redb::Builder::new()
                .set_cache_size(cache_bytes())
                .create_with_file_format_v3(true)
                .create(path)
                .map_err(err)?;
            Ok(Writer::over(db))
        }
    }
}

/// File format 3, through the current redb (4.x).
pub mod v4 {
    use redb::{Key, ReadableDatabase, ReadableTableMetadata, Value};

    pub type RT<'a> = redb::ReadTransaction;

    binding! {
        storage: redb_4,
        source: own,
        open_existing: open,
        layout: typename::Layout {
            version: "4.6",
            words: 4,
            name_word: 0,
            class_byte: Some(0),
        },
        builtin: [u8, u16, u32, u64, u128, i8, i16, i32, i64, i128, bool, char, (), f32, f64, &str, String, &[u8], (u64, &[u8])],
        templates: {
            "Internal" => (u8, "u8", u128, "u128"),
            "Internal3" => ((u8, u8), "(u8,u8)", (u8, u16), "(u8,u16)"),
        },
        append: own,
        reclassify: internal2,
    }

    /// Whether `recs` may go in through the cursor at the table's end: their keys
    /// strictly ascending (byte order, the order of `&[u8]` keys) and after the table's
    /// last key. Otherwise (an in-place upgrade rewriting keys it holds, a batch out of
    /// order) `Table::insert` overwrites as it always did.
    fn appends<V: Value + 'static>(
        t: &redb::Table<&[u8], V>,
        recs: &[(&[u8], &[u8], u64)],
    ) -> Result<bool, NErr> {
        use redb::ReadableTable;
        if !recs.windows(2).all(|w| w[0].0 < w[1].0) {
            return Ok(false);
        }
        let (Some(first), Some(last)) = (recs.first(), t.last().map_err(err)?) else {
            return Ok(true); // an empty batch, or an empty table
        };
        Ok(last.0.value() < first.0)
    }

    /// A batch appended through redb 4.x's own bulk path: a cursor at the table's end,
    /// whose runs of `insert_before` (each record's by `put`) redb buffers and splices
    /// in together (half the time of `Table::insert` per record here, 1M records of
    /// ~316 bytes). False, with nothing written, when the batch does not append
    /// (`appends`).
    fn append<V: Value + 'static>(
        t: &mut redb::Table<&[u8], V>,
        recs: &[(&[u8], &[u8], u64)],
        put: impl Fn(
            &mut redb::CursorMut<'_, &'static [u8], V>,
            &(&[u8], &[u8], u64),
        ) -> Result<(), redb::CursorError>,
    ) -> Result<bool, NErr> {
        if !appends(t, recs)? {
            return Ok(false);
        }
        let mut c = t.upper_bound_mut(Bound::<&[u8]>::Unbounded).map_err(err)?;
        for rec in recs {
            put(&mut c, rec).map_err(err)?;
        }
        c.close().map_err(err)?;
        Ok(true)
    }

    /// `append` for a plain table (`&[u8] -> &[u8]`).
    fn append_plain(
        t: &mut redb::Table<&[u8], &[u8]>,
        recs: &[(&[u8], &[u8], u64)],
    ) -> Result<bool, NErr> {
        append(t, recs, |c, (k, v, _)| c.insert_before(*k, *v))
    }

    /// `append` for a versioned table (`&[u8] -> (u64, &[u8])`).
    fn append_versioned(
        t: &mut redb::Table<&[u8], (u64, &[u8])>,
        recs: &[(&[u8], &[u8], u64)],
    ) -> Result<bool, NErr> {
        append(t, recs, |c, (k, v, ver)| c.insert_before(*k, (*ver, *v)))
    }

    /// A source: the read-only handle, or (for a file that needs repair, which redb
    /// refuses to open read-only) a handle over a copy-on-write view of it.
    #[allow(dead_code)] // held for its lifetime only
    pub enum SourceDb {
        ReadOnly(redb::ReadOnlyDatabase),
        Overlay(redb::Database),
    }

    pub fn open_source(path: &std::path::Path) -> Result<(SourceDb, RT<'static>), NErr> {
        match redb::Builder::new()
            .set_cache_size(cache_bytes())
            .open_read_only(path)
        {
            Ok(db) => {
                let txn = db.begin_read().map_err(err)?;
                Ok((SourceDb::ReadOnly(db), txn))
            }
            Err(redb::DatabaseError::RepairAborted) => {
                let db = overlay_db(path)?;
                let txn = db.begin_read().map_err(err)?;
                Ok((SourceDb::Overlay(db), txn))
            }
            Err(e) => Err(err(e)),
        }
    }

    /// redb 3.0-4.1 classified variable-width tuples `Internal2`; redb 4.x still opens
    /// such names but makes `Internal3` ones, so the byte is set here (the variant's
    /// place in redb's `TypeClassification`: Internal, UserDefined, Internal2, Internal3).
    fn internal2(class: &str, name: &str) -> Option<Result<redb::TypeName, NErr>> {
        (class == "Internal2").then(|| {
            let t = make_type_name("Internal", name)?;
            let (internal, user) = (<u8 as Value>::type_name(), redb::TypeName::new("u128"));
            typename::reclassify(t, class, 2, (&internal, "u8"), (&user, "u128"), &LAYOUT)
        })
    }
}
