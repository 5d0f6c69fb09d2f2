//! Reading and rebuilding redb `TypeName`s.
//!
//! redb keeps a type name's classification (and, before 4.x, its name) private and
//! its built-in constructors crate-private; only user-defined names can be made.
//! Yet a table written back must carry exactly the stored name and classification,
//! or the application's own `TableDefinition` no longer opens it. Reading uses the
//! one public view, the derived `Debug` form. Rebuilding takes two names redb makes
//! itself with the wanted classification (of different lengths), finds the one
//! `String`-sized window holding their (distinct) buffers and their lengths, and
//! replaces that `String` with the stored name. The result is checked through its
//! `Debug` form; if anything does not match, an error is returned and the value is
//! leaked rather than dropped.
use super::errors::NErr;
use std::fmt::Debug;
use std::mem::size_of;

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

fn words<T>(t: &T) -> Vec<usize> {
    let base = t as *const T as *const usize;
    // SAFETY: reads whole words of a live value as integers; T holds a String, so it is word-aligned.
    (0..size_of::<T>() / size_of::<usize>())
        .map(|i| unsafe { std::ptr::read(base.add(i)) })
        .collect()
}

/// Word indices of the pointer and the length inside a `String`.
fn string_layout() -> Option<(usize, usize)> {
    let mut s = String::with_capacity(37);
    s.push_str("abc");
    let w = words(&s);
    let ip = w.iter().position(|&x| x == s.as_ptr() as usize)?;
    let il = w.iter().position(|&x| x == 3)?;
    Some((ip, il))
}

/// The word index of the `String` inside two type names `ta` and `tb` named `a` and `b`
/// (distinct names of different lengths, so that only that window tells them apart).
fn string_window<T>(ta: &T, a: &str, tb: &T, b: &str) -> Result<usize, String> {
    let (ip, il) = string_layout().ok_or("unknown String layout")?;
    let (wa, wb) = (words(ta), words(tb));
    let sw = size_of::<String>() / size_of::<usize>();
    let mut found = None;
    for s in 0..=wa.len().saturating_sub(sw) {
        // The other words (the classification, with padding bytes) are not compared:
        // padding is not guaranteed equal. The pointer words must be two distinct heap
        // addresses, the length words the two names' lengths, and any third word (the
        // capacity) at least the length.
        let ic: Vec<usize> = (0..sw).filter(|i| *i != ip && *i != il).collect();
        let plausible = |w: &[usize], len: usize| {
            w[s + il] == len && w[s + ip] > 4096 && ic.iter().all(|c| w[s + c] >= len)
        };
        if plausible(&wa, a.len()) && plausible(&wb, b.len()) && wa[s + ip] != wb[s + ip] {
            if found.is_some() {
                return Err("ambiguous layout".into());
            }
            found = Some(s);
        }
    }
    found.ok_or_else(|| "layout not found".to_string())
}

/// A type name of `class` named `name`. `templates` are two names redb made with
/// that classification, named `a` and `b` (of different lengths).
pub fn make<T: Debug>(
    class: &str,
    name: &str,
    templates: Option<(T, &str, T, &str)>,
    user: fn(&str) -> T,
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
    let s = string_window(&ta, a, &tb, b).map_err(|e| fail(&e))?;
    // SAFETY: the window is the template's `String` field (only it differs between two
    // names that differ only in their name, and it holds the name's length); the old
    // String is dropped and a valid one written in its place.
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

/// `t` (a built-in name of the `Internal` classification) reclassified as `class`,
/// a classification this redb version reads but no longer makes (redb 4.x reads
/// redb 3.x's `Internal2` but spells the same types `Internal3`). `internal` and
/// `user` are two names differing in their classification (`Internal`, `UserDefined`)
/// named `a` and `b` (of different lengths); `disc` is the wanted classification's
/// place in redb's enum. The byte that holds the classification is the one outside
/// the name's `String` that reads 0 (`Internal`) in `internal` and 1 (`UserDefined`)
/// in `user`; the result is checked through its `Debug` form, and each candidate
/// byte is put back when the check fails.
pub fn reclassify<T: Debug>(
    mut t: T,
    class: &str,
    disc: u8,
    internal: (&T, &str),
    user: (&T, &str),
) -> Result<T, NErr> {
    let name = parts(&t).1;
    let fail = |why: &str| {
        NErr::other(format!(
            "cannot make redb type name {name:?} of classification {class}: {why}"
        ))
    };
    let s = string_window(internal.0, internal.1, user.0, user.1).map_err(|e| fail(&e))?;
    let word = size_of::<usize>();
    let skip = s * word..(s * word + size_of::<String>());
    let (bi, bu) = (bytes(internal.0), bytes(user.0));
    let want = (class.to_string(), name.clone());
    for p in (0..bi.len()).filter(|p| !skip.contains(p) && bi[*p] == 0 && bu[*p] == 1) {
        // SAFETY: `p` lies outside the `String` and holds the classification's
        // discriminant (Internal) in `t` as in `internal` (or is padding); `disc` is a
        // valid discriminant of that enum, and the old byte is restored if the
        // `Debug` form shows that `p` was not the classification.
        let slot = unsafe { (&mut t as *mut T as *mut u8).add(p) };
        let old = unsafe { slot.read() };
        if old != 0 {
            continue;
        }
        unsafe { slot.write(disc) };
        if parts(&t) == want {
            return Ok(t);
        }
        unsafe { slot.write(old) };
    }
    Err(fail("the classification's byte was not found"))
}

fn bytes<T>(t: &T) -> Vec<u8> {
    let base = t as *const T as *const u8;
    // SAFETY: reads the bytes of a live value as integers (as `words` does).
    (0..size_of::<T>())
        .map(|i| unsafe { std::ptr::read(base.add(i)) })
        .collect()
}
