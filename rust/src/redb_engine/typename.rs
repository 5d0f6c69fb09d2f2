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
use super::NErr;
use std::fmt::Debug;
use std::mem::size_of;

/// (classification, name) from a type name's Debug form
/// `TypeName { classification: Internal, name: "u64", .. }`.
pub fn parts<T: Debug>(t: &T) -> (String, String) {
    let dbg = format!("{t:?}");
    let class = dbg
        .split("classification: ")
        .nth(1)
        .map(|s| s.chars().take_while(|c| c.is_ascii_alphanumeric()).collect::<String>())
        .unwrap_or_else(|| "Internal".to_string());
    let name = dbg.split_once("name: \"").map(|(_, rest)| unescape(rest)).unwrap_or_default();
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
    (0..size_of::<T>() / size_of::<usize>()).map(|i| unsafe { std::ptr::read(base.add(i)) }).collect()
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
        return Err(NErr::Refused(format!("type {name:?} has a classification ({class}) this redb version cannot write")));
    };
    let fail = |why: &str| NErr::Other(format!("cannot rebuild redb type name {name:?}: {why}"));
    let (ip, il) = string_layout().ok_or_else(|| fail("unknown String layout"))?;
    let (wa, wb) = (words(&ta), words(&tb));
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
                return Err(fail("ambiguous layout"));
            }
            found = Some(s);
        }
    }
    let s = found.ok_or_else(|| fail("layout not found"))?;
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
