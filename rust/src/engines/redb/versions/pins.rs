//! The type-name layouts pinned in `mod.rs` (`LAYOUT`), held to every supported redb
//! version. A redb release that moves a `TypeName`'s parts fails here (and at run time
//! with an error naming the version) rather than writing a wrong name: each version's
//! rebuilt names must equal the names redb makes for the same types, and survive a
//! real file, read back through redb's own type check.
use super::super::typename::{self, Layout};
use super::{v1, v2, v4};

fn pair(class: &str, name: &str) -> (String, String) {
    (class.to_string(), name.to_string())
}

/// A version's tests: `$names` (classification, name, redb's own type name) are made
/// as redb makes them; `$file` (a key and a value type's classification and name)
/// survives a file and opens as the types `$k -> $v` (and not as `u64 -> $v`).
macro_rules! pins {
    ($own:ident, $survive:ident, $v:ident, $value_trait:path, $type_name:path,
     names: [$(($class:literal, $name:literal, $t:ty)),* $(,)?],
     file: ($kc:literal, $kn:literal, $k:ty), ($vc:literal, $vn:literal, $vt:ty) $(,)?) => {
        #[test]
        fn $own() {
            use $value_trait as Value;
            let own = [$(($class, $name, <$t as Value>::type_name())),*];
            for (class, name, redb_s) in own {
                let made = $v::make_type_name(class, name).unwrap();
                assert_eq!(made, redb_s, "{class} {name}");
                assert_eq!($v::type_parts(&made), pair(class, name));
            }
            let user = $v::make_type_name("UserDefined", "app::Key").unwrap();
            assert_eq!(user, $type_name("app::Key"));
        }

        #[test]
        fn $survive() {
            let (_dir, db) = $v::written::file_with(($kc, $kn), ($vc, $vn));
            assert_eq!($v::written::stored(&db), (pair($kc, $kn), pair($vc, $vn)));
            assert!($v::written::opens_as::<$k, $vt>(&db));
            assert!(!$v::written::opens_as::<u64, $vt>(&db));
        }
    };
}

// One block a version (rustfmt leaves macro bodies as written).
#[rustfmt::skip]
pins! {
    redb_1_5_names_are_redb_s_own, redb_1_5_rebuilt_names_survive_a_file, v1, redb1::RedbValue, redb1::TypeName::new,
    names: [("Internal", "u64", u64), ("Internal", "(u64,&[u8])", (u64, &[u8])), ("Internal", "Option<u64>", Option<u64>), ("Internal", "(u32,&str)", (u32, &str))],
    file: ("Internal", "Option<u64>", Option<u64>), ("Internal", "(u32,&str)", (u32, &str)),
}

#[rustfmt::skip]
pins! {
    redb_2_6_names_are_redb_s_own, redb_2_6_rebuilt_names_survive_a_file, v2, redb2::Value, redb2::TypeName::new,
    names: [("Internal", "String", String), ("Internal", "(u64,&[u8])", (u64, &[u8])), ("Internal", "Option<u64>", Option<u64>), ("Internal", "[u16;3]", [u16; 3])],
    file: ("Internal", "Option<u64>", Option<u64>), ("Internal", "(u32,&str)", (u32, &str)),
}

#[rustfmt::skip]
pins! {
    redb_4_names_are_redb_s_own, redb_4_rebuilt_names_survive_a_file, v4, redb::Value, redb::TypeName::new,
    names: [("Internal", "&[u8]", &[u8]), ("Internal3", "(u64,&[u8])", (u64, &[u8])), ("Internal3", "Option<u64>", Option<u64>), ("Internal3", "[u16;3]", [u16; 3])],
    file: ("Internal3", "Option<u64>", Option<u64>), ("Internal3", "(u32,&str)", (u32, &str)),
}

/// The names redb 3.0-4.1 wrote for composites in format 3, which redb 4.x still
/// opens but no longer makes: `Internal` (an `Option`) and `Internal2` (a
/// variable-width tuple, re-classified over the pinned classification byte).
#[test]
fn redb_4_writes_the_names_older_redb_wrote() {
    let (_dir, db) =
        v4::written::file_with(("Internal", "Option<u64>"), ("Internal2", "(u32,&str)"));
    assert_eq!(
        v4::written::stored(&db),
        (
            pair("Internal", "Option<u64>"),
            pair("Internal2", "(u32,&str)")
        )
    );
    assert!(v4::written::opens_as::<Option<u64>, (u32, &str)>(&db));
}

/// A layout that is not the type's own is refused, with the version, before anything
/// is rewritten.
#[test]
fn a_layout_other_than_the_pinned_one_is_refused() {
    use redb::Value;
    let rebuild = |layout: Layout| {
        let templates = (
            <u8 as Value>::type_name(),
            "u8",
            <u128 as Value>::type_name(),
            "u128",
        );
        let made = typename::make(
            "Internal",
            "Option<u64>",
            Some(templates),
            redb::TypeName::new,
            &layout,
        );
        made.unwrap_err().message
    };
    let moved = rebuild(Layout {
        name_word: 1,
        ..v4::LAYOUT
    });
    assert!(
        moved.contains("redb 4.6's TypeName is not laid out as pinned"),
        "{moved}"
    );
    let grown = rebuild(Layout {
        words: 5,
        ..v4::LAYOUT
    });
    assert!(grown.contains("4 words, not the 5 pinned"), "{grown}");

    let other_byte = Layout {
        class_byte: Some(1),
        ..v4::LAYOUT
    };
    let (internal, user) = (<u8 as Value>::type_name(), redb::TypeName::new("u128"));
    let t = v4::make_type_name("Internal", "(u32,&str)").unwrap();
    let e = typename::reclassify(
        t,
        "Internal2",
        2,
        (&internal, "u8"),
        (&user, "u128"),
        &other_byte,
    );
    assert!(e.unwrap_err().message.contains("is not the classification"));
}
