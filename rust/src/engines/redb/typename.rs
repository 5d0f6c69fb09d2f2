//! Reading and rebuilding redb `TypeName`s.
//!
//! redb keeps a type name's classification (and, before 4.x, its name) private and
//! its built-in constructors crate-private; only user-defined names can be made.
//! Yet a table written back must carry exactly the stored name and classification,
//! or the application's own `TableDefinition` no longer opens it. Reading uses the
//! one public view, the derived `Debug` form.
//!
//! Making one goes through redb's public API where it reaches: `TypeName::new` for a
//! user-defined name, and the type name of the built-in type itself for every name a
//! version makes for the types it knows best (`versions/mod.rs`, `builtin`). Any
//! other name (an application's composite, or a classification the version reads but
//! no longer makes) is rebuilt in memory from two names redb makes itself, over a
//! layout pinned per supported redb version (`Layout`): the type's size is checked when
//! the crate compiles, the pinned `String` window and classification byte against the
//! two templates before each rebuild, and the result through its `Debug` form; the
//! tests in `versions/pins.rs` write each rebuilt name to a real file and read it back
//! through redb. A redb version whose layout differs fails to build or is refused with
//! an error naming the version, never written wrongly.
use super::errors::NErr;
use std::fmt::Debug;
use std::mem::size_of;

/// Where one redb version keeps a `TypeName`'s parts, as measured (see the module doc).
pub struct Layout {
    /// The redb version measured (for messages).
    pub version: &'static str,
    /// `size_of::<TypeName>()`, in words.
    pub words: usize,
    /// The word at which the name's `String` starts.
    pub name_word: usize,
    /// The byte holding the classification's discriminant, counted from the first byte
    /// after the name's `String` (`None`: the version is never re-classified).
    pub class_byte: Option<usize>,
}

impl Layout {
    fn check_size<T>(&self) -> Result<(), String> {
        let words = size_of::<T>() / size_of::<usize>();
        if words == self.words {
            Ok(())
        } else {
            Err(format!("{words} words, not the {} pinned", self.words))
        }
    }

    fn changed(&self, what: String) -> String {
        format!(
            "redb {}'s TypeName is not laid out as pinned ({what}); measure it and pin it again (versions/mod.rs)",
            self.version
        )
    }
}

/// (classification, name) from a type name's Debug form
/// `TypeName { classification: Internal, name: "u64", .. }`.
pub fn parts<T: Debug>(t: &T) -> (String, String) {
    let dbg = format!("{t:?}");
    let class = dbg
        .split("classification: ")
        .nth(1)
        .map(|s| {
            s.chars()
                .take_while(|c| c.is_ascii_alphanumeric())
                .collect::<String>()
        })
        .unwrap_or_else(|| "Internal".to_string());
    let name = dbg
        .split_once("name: \"")
        .map(|(_, rest)| unescape(rest))
        .unwrap_or_default();
    (class, name)
}

/// Undo `str`'s Debug escaping up to the closing quote.
fn unescape(s: &str) -> String {
    let mut out = String::new();
    let mut it = s.chars();
    while let Some(c) = it.next() {
        match c {
            '"' => break,
            '\\' => match it.next() {
                Some('n') => out.push('\n'),
                Some('t') => out.push('\t'),
                Some('r') => out.push('\r'),
                Some('0') => out.push('\0'),
                Some('u') => {
                    let hex: String = it.by_ref().skip(1).take_while(|c| *c != '}').collect();
                    if let Some(ch) = u32::from_str_radix(&hex, 16).ok().and_then(char::from_u32) {
                        out.push(ch);
                    }
                }
                Some(other) => out.push(other),
                None => break,
            },
            c => out.push(c),
        }
    }
    out
}

/// The words of the `String` inside `t` at word `at`. The caller has checked that
/// `t` is `Layout::words` long and the window inside it.
fn window<T>(t: &T, at: usize) -> [usize; STRING_WORDS] {
    let base = t as *const T as *const usize;
    // SAFETY: `at + STRING_WORDS` words lie inside `t` (checked by the caller), and a
    // value holding a `String` is word-aligned; the words read are that `String`'s,
    // which are initialised integers.
    unsafe { std::ptr::read(base.add(at) as *const [usize; STRING_WORDS]) }
}

const STRING_WORDS: usize = size_of::<String>() / size_of::<usize>();

/// Word indices of the pointer and the length inside a `String`.
fn string_layout() -> Option<(usize, usize)> {
    let mut s = String::with_capacity(37);
    s.push_str("abc");
    let w = window(&s, 0);
    let ip = w.iter().position(|&x| x == s.as_ptr() as usize)?;
    let il = w.iter().position(|&x| x == 3)?;
    Some((ip, il))
}

/// The pinned word index of the name's `String`, once two templates `ta` and `tb`
/// named `a` and `b` (distinct names of different lengths) confirm it: there, each
/// holds a heap pointer of its own, its name's length, and a capacity at least that.
fn pinned_window<T>(layout: &Layout, ta: &T, a: &str, tb: &T, b: &str) -> Result<usize, String> {
    layout.check_size::<T>().map_err(|e| layout.changed(e))?;
    let at = layout.name_word;
    if at + STRING_WORDS > layout.words {
        return Err(layout.changed(format!("the name at word {at}")));
    }
    let (ip, il) = string_layout().ok_or("unknown String layout")?;
    let holds = |w: [usize; STRING_WORDS], len: usize| {
        w[il] == len && w[ip] > 4096 && (0..STRING_WORDS).all(|i| i == ip || w[i] >= len)
    };
    let (wa, wb) = (window(ta, at), window(tb, at));
    if !(holds(wa, a.len()) && holds(wb, b.len()) && wa[ip] != wb[ip]) {
        return Err(layout.changed(format!("no name at word {at}")));
    }
    Ok(at)
}

/// A type name of `class` named `name`. `templates` are two names redb made with
/// that classification, named `a` and `b` (of different lengths); `layout` is where
/// this redb version keeps the name.
pub fn make<T: Debug>(
    class: &str,
    name: &str,
    templates: Option<(T, &str, T, &str)>,
    user: fn(&str) -> T,
    layout: &Layout,
) -> Result<T, NErr> {
    if class == "UserDefined" {
        return Ok(user(name));
    }
    let Some((mut ta, a, tb, b)) = templates else {
        return Err(NErr::refused(format!(
            "type {name:?} has a classification ({class}) this redb version cannot write"
        )));
    };
    let fail = |why: &str| NErr::other(format!("cannot rebuild redb type name {name:?}: {why}"));
    let s = pinned_window(layout, &ta, a, &tb, b).map_err(|e| fail(&e))?;
    // SAFETY: the window is the template's `String` field (pinned for this redb version
    // and confirmed on both templates); the old String is dropped and a valid one
    // written in its place.
    unsafe {
        let slot = (&mut ta as *mut T as *mut usize).add(s) as *mut String;
        drop(std::ptr::read(slot));
        std::ptr::write(slot, name.to_string());
    }
    if parts(&ta) != (parts(&tb).0, name.to_string()) {
        std::mem::forget(ta);
        return Err(fail("check failed"));
    }
    Ok(ta)
}

/// `t` (a name of the `Internal` classification) reclassified as `class`, a
/// classification this redb version reads but no longer makes (redb 4.x reads
/// redb 3.x's `Internal2` but spells the same types `Internal3`). `internal` and
/// `user` are two names differing in their classification (`Internal`, `UserDefined`)
/// named `a` and `b` (of different lengths); `disc` is the wanted classification's
/// place in redb's enum. The classification's byte is the one pinned in `layout`,
/// confirmed to read 0 (`Internal`) in `internal` and `t` and 1 (`UserDefined`) in
/// `user`; the result is checked through its `Debug` form (and the byte put back if
/// the check fails).
pub fn reclassify<T: Debug>(
    mut t: T,
    class: &str,
    disc: u8,
    internal: (&T, &str),
    user: (&T, &str),
    layout: &Layout,
) -> Result<T, NErr> {
    let name = parts(&t).1;
    let fail = |why: &str| {
        NErr::other(format!(
            "cannot make redb type name {name:?} of classification {class}: {why}"
        ))
    };
    let s = pinned_window(layout, internal.0, internal.1, user.0, user.1).map_err(|e| fail(&e))?;
    let p = layout
        .class_byte
        .map(|b| (s + STRING_WORDS) * size_of::<usize>() + b)
        .filter(|p| *p < size_of::<T>())
        .ok_or_else(|| fail(&layout.changed("no classification byte".into())))?;
    if (byte(internal.0, p), byte(user.0, p), byte(&t, p)) != (0, 1, 0) {
        return Err(fail(
            &layout.changed(format!("byte {p} is not the classification")),
        ));
    }
    let slot = (&mut t as *mut T as *mut u8).wrapping_add(p);
    // SAFETY: `p` lies inside `t`, outside its `String`, and holds the classification's
    // discriminant (pinned, and confirmed above on three names); `disc` is a valid
    // discriminant of that enum, and 0 (`Internal`, what it held) is put back if the
    // `Debug` form shows another classification.
    unsafe { slot.write(disc) };
    if parts(&t) != (class.to_string(), name.clone()) {
        unsafe { slot.write(0) };
        return Err(fail("check failed"));
    }
    Ok(t)
}

/// The byte at `p` inside `t` (`p` is inside it, and not padding: the caller's pin).
fn byte<T>(t: &T, p: usize) -> u8 {
    // SAFETY: `p < size_of::<T>()` (checked by the caller) and the byte is a field's.
    unsafe { (t as *const T as *const u8).add(p).read() }
}
