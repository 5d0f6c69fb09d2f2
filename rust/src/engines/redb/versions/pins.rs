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

#[test]
fn redb_1_5_names_are_redb_s_own() {
    use redb1::RedbValue as Value;
    let own = [
        ("Internal", "u64", <u64 as Value>::type_name()),
        (
            "Internal",
            "(u64,&[u8])",
            <(u64, &[u8]) as Value>::type_name(),
        ),
        (
            "Internal",
            "Option<u64>",
            <Option<u64> as Value>::type_name(),
        ),
        (
            "Internal",
            "(u32,&str)",
            <(u32, &str) as Value>::type_name(),
        ),
        ("UserDefined", "app::Key", redb1::TypeName::new("app::Key")),
    ];
    for (class, name, redb_s) in own {
        let made = v1::make_type_name(class, name).unwrap();
        assert_eq!(made, redb_s, "{class} {name}");
        assert_eq!(v1::type_parts(&made), pair(class, name));
    }
}

#[test]
fn redb_1_5_rebuilt_names_survive_a_file() {
    let (_dir, db) =
        v1::written::file_with(("Internal", "Option<u64>"), ("Internal", "(u32,&str)"));
    assert_eq!(
        v1::written::stored(&db),
        (
            pair("Internal", "Option<u64>"),
            pair("Internal", "(u32,&str)")
        )
    );
    assert!(v1::written::opens_as::<Option<u64>, (u32, &str)>(&db));
    assert!(!v1::written::opens_as::<u64, (u32, &str)>(&db));
}

#[test]
fn redb_2_6_names_are_redb_s_own() {
    use redb2::Value;
    let own = [
        ("Internal", "u64", <u64 as Value>::type_name()),
        ("Internal", "String", <String as Value>::type_name()),
        (
            "Internal",
            "(u64,&[u8])",
            <(u64, &[u8]) as Value>::type_name(),
        ),
        (
            "Internal",
            "Option<u64>",
            <Option<u64> as Value>::type_name(),
        ),
        (
            "Internal",
            "(u32,&str)",
            <(u32, &str) as Value>::type_name(),
        ),
        ("Internal", "[u16;3]", <[u16; 3] as Value>::type_name()),
        ("UserDefined", "app::Key", redb2::TypeName::new("app::Key")),
    ];
    for (class, name, redb_s) in own {
        let made = v2::make_type_name(class, name).unwrap();
        assert_eq!(made, redb_s, "{class} {name}");
        assert_eq!(v2::type_parts(&made), pair(class, name));
    }
}

#[test]
fn redb_2_6_rebuilt_names_survive_a_file() {
    let (_dir, db) =
        v2::written::file_with(("Internal", "Option<u64>"), ("Internal", "(u32,&str)"));
    assert_eq!(
        v2::written::stored(&db),
        (
            pair("Internal", "Option<u64>"),
            pair("Internal", "(u32,&str)")
        )
    );
    assert!(v2::written::opens_as::<Option<u64>, (u32, &str)>(&db));
    assert!(!v2::written::opens_as::<u64, (u32, &str)>(&db));
}

#[test]
fn redb_4_names_are_redb_s_own() {
    use redb::Value;
    let own = [
        ("Internal", "u64", <u64 as Value>::type_name()),
        ("Internal", "&[u8]", <&[u8] as Value>::type_name()),
        (
            "Internal3",
            "(u64,&[u8])",
            <(u64, &[u8]) as Value>::type_name(),
        ),
        (
            "Internal3",
            "Option<u64>",
            <Option<u64> as Value>::type_name(),
        ),
        (
            "Internal3",
            "(u32,&str)",
            <(u32, &str) as Value>::type_name(),
        ),
        ("Internal3", "[u16;3]", <[u16; 3] as Value>::type_name()),
        ("UserDefined", "app::Key", redb::TypeName::new("app::Key")),
    ];
    for (class, name, redb_s) in own {
        let made = v4::make_type_name(class, name).unwrap();
        assert_eq!(made, redb_s, "{class} {name}");
        assert_eq!(v4::type_parts(&made), pair(class, name));
    }
}

#[test]
fn redb_4_rebuilt_names_survive_a_file() {
    let (_dir, db) =
        v4::written::file_with(("Internal3", "Option<u64>"), ("Internal3", "(u32,&str)"));
    assert_eq!(
        v4::written::stored(&db),
        (
            pair("Internal3", "Option<u64>"),
            pair("Internal3", "(u32,&str)")
        )
    );
    assert!(v4::written::opens_as::<Option<u64>, (u32, &str)>(&db));
    assert!(!v4::written::opens_as::<u64, (u32, &str)>(&db));
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
    let templates = || {
        Some((
            <u8 as Value>::type_name(),
            "u8",
            <u128 as Value>::type_name(),
            "u128",
        ))
    };
    let moved = Layout {
        name_word: 1,
        ..v4::LAYOUT
    };
    let e = typename::make(
        "Internal",
        "Option<u64>",
        templates(),
        redb::TypeName::new,
        &moved,
    )
    .unwrap_err();
    assert!(
        e.message
            .contains("redb 4.6's TypeName is not laid out as pinned"),
        "{e:?}"
    );
    let grown = Layout {
        words: 5,
        ..v4::LAYOUT
    };
    let e = typename::make(
        "Internal",
        "Option<u64>",
        templates(),
        redb::TypeName::new,
        &grown,
    )
    .unwrap_err();
    assert!(e.message.contains("4 words, not the 5 pinned"), "{e:?}");

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
    )
    .unwrap_err();
    assert!(e.message.contains("is not the classification"), "{e:?}");
}
