//! redb key types parsed from their stored type names, and the order-preserving
//! byte encoding of the state model: for every supported key type, comparing the
//! encodings with memcmp gives redb's own order for that type, and the encoding
//! decodes back to the exact stored bytes.
//!
//! Encoding (`final` means nothing follows the item inside the key):
//! unsigned ints big-endian; signed big-endian with the sign bit flipped; `bool` one
//! byte; `char` its code point as 3 bytes big-endian; `()` nothing; `[u8; N]` raw;
//! `&[u8]`/`&str`/`String` raw when final, else `0x00` escaped as `00 FF` and
//! terminated by `00 00`; `Option<T>` `00` for None, `01` then T; tuples and arrays
//! the concatenation of their elements, the last one inheriting `final`.

/// A parsed redb key type.
#[derive(Debug, Clone, PartialEq)]
pub enum TypeExpr {
    UInt(usize),
    SInt(usize),
    Bool,
    Char,
    Unit,
    /// `&[u8]`, `&str`, `String`: variable width, bytewise order.
    Bytes,
    /// `[u8; N]` / `&[u8; N]`: fixed width, bytewise order.
    FixedBytes(usize),
    Array(Box<TypeExpr>, usize),
    Option(Box<TypeExpr>),
    /// `niche::Option<T>` (redb 4.x, for a `T` that declares a niche: a byte string no
    /// value of `T` encodes to): `None` is stored as the niche, `Some(x)` as `x` alone;
    /// `None` sorts first. Encoded like `Option<T>` (`00`, or `01` then `T`).
    NicheOption(Box<TypeExpr>, Vec<u8>),
    /// `Vec<T>` (a value type only): varint count, then the elements (each with a
    /// varint length when `T` is variable width).
    Vec(Box<TypeExpr>),
    /// `f32`/`f64` (value types only).
    Float(usize),
    /// Elements, and whether a variable-width tuple uses the redb <= 2.x layout
    /// (u32 lengths of every element but the last) rather than the 3.0 one
    /// (varint lengths of the variable-width elements but the last).
    Tuple(Vec<TypeExpr>, bool),
    /// A user-defined type inside a composite, asserted to be ordered by its stored
    /// bytes (`--bytewise-key`), and its width once known (see `resolve`).
    Custom(String, Option<usize>),
}

/// Whether `name` is spelt as a user-defined type's name can be (a path, no composite
/// syntax); built-in names pass too (`parse_with` tries them first).
fn leaf_syntax(name: &str) -> bool {
    !name.is_empty() && !name.contains(['(', ')', '<', '>', '[', ']', ';', ',', '&', ' '])
}

/// The width of a `NonZero*` type (stored as the primitive it wraps), by name.
fn nonzero_width(name: &str) -> Option<usize> {
    let bits = name
        .strip_prefix("NonZeroU")
        .or_else(|| name.strip_prefix("NonZeroI"))?;
    match bits {
        "8" => Some(1),
        "16" => Some(2),
        "32" => Some(4),
        "64" => Some(8),
        "128" => Some(16),
        _ => None,
    }
}

/// The niche redb 4.x declares for a built-in type (None: it declares none, or the
/// type is user-defined and its niche cannot be known from its name).
fn niche_of(name: &str) -> Option<Vec<u8>> {
    let n = name.trim();
    match n {
        "bool" | "&str" | "String" => Some(vec![0xff]),
        "char" => Some(vec![0xff; 3]),
        _ => {
            if let Some(w) = nonzero_width(n) {
                return Some(vec![0; w]);
            }
            // A one-element tuple is stored as its element, and declares its niche.
            let inner = n.strip_prefix('(')?.strip_suffix(",)")?;
            niche_of(inner)
        }
    }
}

fn split_top(s: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut depth = 0i32;
    let mut start = 0;
    for (i, c) in s.char_indices() {
        match c {
            '(' | '<' | '[' => depth += 1,
            ')' | '>' | ']' => depth -= 1,
            ',' if depth == 0 => {
                out.push(&s[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    out.push(&s[start..]);
    out
}

impl TypeExpr {
    /// Parse a stored key type name; None for custom or unknown types.
    pub fn parse(name: &str, legacy_tuples: bool) -> Option<TypeExpr> {
        Self::parse_with(name, legacy_tuples, &|_| false)
    }

    /// Parse a type name whose user-defined leaves for which `custom` holds become
    /// `Custom` (of unknown width: see `resolve`); None if any other part is unknown.
    pub fn parse_with(
        name: &str,
        legacy_tuples: bool,
        custom: &dyn Fn(&str) -> bool,
    ) -> Option<TypeExpr> {
        let n = name.trim();
        let parse = |inner: &str| Self::parse_with(inner, legacy_tuples, custom);
        let t = match n {
            "u8" => TypeExpr::UInt(1),
            "u16" => TypeExpr::UInt(2),
            "u32" => TypeExpr::UInt(4),
            "u64" => TypeExpr::UInt(8),
            "u128" => TypeExpr::UInt(16),
            "i8" => TypeExpr::SInt(1),
            "i16" => TypeExpr::SInt(2),
            "i32" => TypeExpr::SInt(4),
            "i64" => TypeExpr::SInt(8),
            "i128" => TypeExpr::SInt(16),
            "bool" => TypeExpr::Bool,
            "char" => TypeExpr::Char,
            "()" => TypeExpr::Unit,
            "&[u8]" | "&str" | "String" => TypeExpr::Bytes,
            "f32" => TypeExpr::Float(4),
            "f64" => TypeExpr::Float(8),
            _ => {
                if let Some(w) = nonzero_width(n) {
                    // `NonZero*` is stored and ordered as the primitive it wraps.
                    if n.starts_with("NonZeroU") {
                        TypeExpr::UInt(w)
                    } else {
                        TypeExpr::SInt(w)
                    }
                } else if let Some(inner) = n
                    .strip_prefix("niche::Option<")
                    .and_then(|r| r.strip_suffix('>'))
                {
                    TypeExpr::NicheOption(Box::new(parse(inner)?), niche_of(inner)?)
                } else if let Some(inner) =
                    n.strip_prefix("Option<").and_then(|r| r.strip_suffix('>'))
                {
                    TypeExpr::Option(Box::new(parse(inner)?))
                } else if let Some(inner) = n.strip_prefix("Vec<").and_then(|r| r.strip_suffix('>'))
                {
                    TypeExpr::Vec(Box::new(parse(inner)?))
                } else if let Some(inner) = n.strip_prefix('[').and_then(|r| r.strip_suffix(']')) {
                    let parts = split_top(inner);
                    if parts.len() != 1 {
                        return None;
                    }
                    let (elem, count) = inner.rsplit_once(';')?;
                    let count: usize = count.trim().parse().ok()?;
                    if elem.trim() == "u8" {
                        TypeExpr::FixedBytes(count)
                    } else {
                        TypeExpr::Array(Box::new(parse(elem)?), count)
                    }
                } else if let Some(inner) = n.strip_prefix('(').and_then(|r| r.strip_suffix(')')) {
                    let inner = inner.strip_suffix(',').unwrap_or(inner);
                    let elems: Option<Vec<TypeExpr>> =
                        split_top(inner).into_iter().map(parse).collect();
                    TypeExpr::Tuple(elems?, legacy_tuples)
                } else if leaf_syntax(n) && custom(n) {
                    TypeExpr::Custom(n.to_string(), None)
                } else {
                    return None;
                }
            }
        };
        Some(t)
    }

    pub fn fixed_width(&self) -> Option<usize> {
        match self {
            TypeExpr::UInt(w) | TypeExpr::SInt(w) | TypeExpr::Float(w) => Some(*w),
            TypeExpr::Vec(_) => None,
            TypeExpr::Bool => Some(1),
            TypeExpr::Char => Some(3),
            TypeExpr::Unit => Some(0),
            TypeExpr::Bytes => None,
            TypeExpr::FixedBytes(n) => Some(*n),
            TypeExpr::Array(t, n) => t.fixed_width().map(|w| w * n),
            TypeExpr::Option(t) => t.fixed_width().map(|w| w + 1),
            TypeExpr::NicheOption(t, _) => t.fixed_width(),
            TypeExpr::Tuple(ts, _) => ts.iter().map(|t| t.fixed_width()).sum(),
            TypeExpr::Custom(_, w) => *w,
        }
    }

    /// The order-preserving encoding of a stored value.
    pub fn encode(&self, stored: &[u8]) -> Result<Vec<u8>, String> {
        let mut out = Vec::with_capacity(stored.len() + 2);
        self.enc(stored, &mut out, true)?;
        Ok(out)
    }

    /// The stored bytes of an order-preserving encoding (the inverse of `encode`).
    #[cfg_attr(not(test), allow(dead_code))]
    pub fn decode(&self, enc: &[u8]) -> Result<Vec<u8>, String> {
        let mut pos = 0;
        let out = self.dec(enc, &mut pos, true)?;
        if pos != enc.len() {
            return Err("trailing bytes after the encoded key".into());
        }
        Ok(out)
    }

    pub fn enc(&self, d: &[u8], out: &mut Vec<u8>, last: bool) -> Result<(), String> {
        if let Some(w) = self.fixed_width() {
            if d.len() != w {
                return Err(format!(
                    "a stored value of width {} where {} was expected",
                    d.len(),
                    w
                ));
            }
        }
        match self {
            TypeExpr::Vec(_) | TypeExpr::Float(_) => return Err("not a key type".into()),
            TypeExpr::UInt(_) => out.extend(d.iter().rev()),
            TypeExpr::SInt(_) => {
                let start = out.len();
                out.extend(d.iter().rev());
                out[start] ^= 0x80;
            }
            TypeExpr::Bool => out.push(d[0]),
            TypeExpr::Char => out.extend(d.iter().rev()),
            TypeExpr::Unit => {}
            TypeExpr::FixedBytes(_) | TypeExpr::Custom(_, Some(_)) => out.extend_from_slice(d),
            TypeExpr::Bytes | TypeExpr::Custom(_, None) => {
                if last {
                    out.extend_from_slice(d);
                } else {
                    for &b in d {
                        out.push(b);
                        if b == 0 {
                            out.push(0xff);
                        }
                    }
                    out.extend_from_slice(&[0, 0]);
                }
            }
            TypeExpr::Option(t) => match d.first() {
                Some(0) => out.push(0),
                Some(1) => {
                    out.push(1);
                    t.enc(&d[1..], out, last)?;
                }
                _ => return Err("an Option with a bad tag".into()),
            },
            TypeExpr::NicheOption(t, niche) => {
                if d == niche.as_slice() {
                    out.push(0);
                } else {
                    out.push(1);
                    t.enc(d, out, last)?;
                }
            }
            TypeExpr::Array(t, n) => {
                let parts = split_array(t, *n, d)?;
                let k = parts.len();
                for (i, p) in parts.into_iter().enumerate() {
                    t.enc(p, out, last && i + 1 == k)?;
                }
            }
            TypeExpr::Tuple(ts, legacy) => {
                let parts = split_tuple(ts, *legacy, d)?;
                let k = parts.len();
                for (i, (t, p)) in ts.iter().zip(parts).enumerate() {
                    t.enc(p, out, last && i + 1 == k)?;
                }
            }
        }
        Ok(())
    }

    pub fn dec(&self, e: &[u8], pos: &mut usize, last: bool) -> Result<Vec<u8>, String> {
        let take = |pos: &mut usize, n: usize| -> Result<&[u8], String> {
            if *pos + n > e.len() {
                return Err("the encoded key is too short for its type".into());
            }
            let s = &e[*pos..*pos + n];
            *pos += n;
            Ok(s)
        };
        Ok(match self {
            TypeExpr::Vec(_) | TypeExpr::Float(_) => return Err("not a key type".into()),
            TypeExpr::UInt(w) => take(pos, *w)?.iter().rev().copied().collect(),
            TypeExpr::SInt(w) => {
                let mut b: Vec<u8> = take(pos, *w)?.to_vec();
                b[0] ^= 0x80;
                b.reverse();
                b
            }
            TypeExpr::Bool => {
                let b = take(pos, 1)?[0];
                if b > 1 {
                    return Err("a bool other than 0 or 1".into());
                }
                vec![b]
            }
            TypeExpr::Char => {
                let b: Vec<u8> = take(pos, 3)?.iter().rev().copied().collect();
                let cp = u32::from_le_bytes([b[0], b[1], b[2], 0]);
                if char::from_u32(cp).is_none() {
                    return Err("not a Unicode scalar value".into());
                }
                b
            }
            TypeExpr::Unit => Vec::new(),
            TypeExpr::FixedBytes(n) | TypeExpr::Custom(_, Some(n)) => take(pos, *n)?.to_vec(),
            TypeExpr::Bytes | TypeExpr::Custom(_, None) => {
                if last {
                    let s = e[*pos..].to_vec();
                    *pos = e.len();
                    s
                } else {
                    let mut out = Vec::new();
                    loop {
                        let b = take(pos, 1)?[0];
                        if b != 0 {
                            out.push(b);
                            continue;
                        }
                        match take(pos, 1)?[0] {
                            0xff => out.push(0),
                            0 => break,
                            _ => return Err("a bad escape in the encoded key".into()),
                        }
                    }
                    out
                }
            }
            TypeExpr::Option(t) => match take(pos, 1)?[0] {
                0 => {
                    let mut out = vec![0u8];
                    if let Some(w) = t.fixed_width() {
                        out.resize(1 + w, 0);
                    }
                    out
                }
                1 => {
                    let mut out = vec![1u8];
                    out.extend(t.dec(e, pos, last)?);
                    out
                }
                _ => return Err("an Option with a bad tag".into()),
            },
            TypeExpr::NicheOption(t, niche) => match take(pos, 1)?[0] {
                0 => niche.clone(),
                1 => {
                    let out = t.dec(e, pos, last)?;
                    if out == *niche {
                        return Err("a Some holding the niche of its type".into());
                    }
                    out
                }
                _ => return Err("an Option with a bad tag".into()),
            },
            TypeExpr::Array(t, n) => {
                let parts: Vec<Vec<u8>> = (0..*n)
                    .map(|i| t.dec(e, pos, last && i + 1 == *n))
                    .collect::<Result<_, _>>()?;
                join_array(t, parts)
            }
            TypeExpr::Tuple(ts, legacy) => {
                let k = ts.len();
                let parts: Vec<Vec<u8>> = ts
                    .iter()
                    .enumerate()
                    .map(|(i, t)| t.dec(e, pos, last && i + 1 == k))
                    .collect::<Result<_, _>>()?;
                join_tuple(ts, *legacy, self.fixed_width().is_some(), parts)
            }
        })
    }
}

impl TypeExpr {
    /// The user-defined types inside, once per occurrence.
    pub fn customs(&self) -> Vec<&str> {
        match self {
            TypeExpr::Custom(n, _) => vec![n.as_str()],
            TypeExpr::Option(t) | TypeExpr::NicheOption(t, _) | TypeExpr::Vec(t) => t.customs(),
            TypeExpr::Array(t, n) => t.customs().repeat(*n),
            TypeExpr::Tuple(ts, _) => ts.iter().flat_map(|t| t.customs()).collect(),
            _ => Vec::new(),
        }
    }

    /// Give the user-defined types inside their width. A composite of fixed width
    /// `total` tells it when it holds one user-defined type (possibly repeated): the
    /// rest of its width. In a variable-width composite they are taken as variable
    /// width, which is right wherever only their bytes matter (the last element of a
    /// tuple, any element of a redb <= 2.x tuple, inside an `Option`); where their
    /// width would change the layout (an earlier element of a redb >= 3.0 tuple, an
    /// array's or a `Vec`'s elements) it cannot be told from the stored type name.
    pub fn resolve(self, total: Option<usize>) -> Result<TypeExpr, String> {
        let names = self.customs();
        let Some(first) = names.first().map(|n| n.to_string()) else {
            return Ok(self);
        };
        let Some(total) = total else {
            self.check_variable()?;
            return Ok(self);
        };
        if names.iter().any(|n| *n != first) {
            return Err(format!("its user-defined types ({}) share {total} bytes in a way the type name does not tell", names.join(", ")));
        }
        let known = self
            .known_width()
            .ok_or("a fixed-width type holds a variable-width part")?;
        let n = names.len();
        if total < known || !(total - known).is_multiple_of(n) {
            return Err(format!("{first} does not fit the type's {total} bytes"));
        }
        Ok(self.with_custom_width((total - known) / n))
    }

    /// The width of everything but the user-defined types (None: a part is variable width).
    fn known_width(&self) -> Option<usize> {
        match self {
            TypeExpr::Custom(..) => Some(0),
            TypeExpr::Option(t) => Some(1 + t.known_width()?),
            TypeExpr::NicheOption(t, _) => t.known_width(),
            TypeExpr::Array(t, n) => Some(t.known_width()? * n),
            TypeExpr::Tuple(ts, _) => ts.iter().map(|t| t.known_width()).sum(),
            t => t.fixed_width(),
        }
    }

    fn with_custom_width(self, w: usize) -> TypeExpr {
        match self {
            TypeExpr::Custom(n, _) => TypeExpr::Custom(n, Some(w)),
            TypeExpr::Option(t) => TypeExpr::Option(Box::new(t.with_custom_width(w))),
            TypeExpr::NicheOption(t, n) => {
                TypeExpr::NicheOption(Box::new(t.with_custom_width(w)), n)
            }
            TypeExpr::Vec(t) => TypeExpr::Vec(Box::new(t.with_custom_width(w))),
            TypeExpr::Array(t, n) => TypeExpr::Array(Box::new(t.with_custom_width(w)), n),
            TypeExpr::Tuple(ts, l) => {
                TypeExpr::Tuple(ts.into_iter().map(|t| t.with_custom_width(w)).collect(), l)
            }
            t => t,
        }
    }

    /// Refuse user-defined types of unknown width where their width changes the layout.
    fn check_variable(&self) -> Result<(), String> {
        let unknown = |t: &TypeExpr, place: &str| -> Result<(), String> {
            match t.customs().first() {
                Some(n) => Err(format!("whether {n} is fixed width changes the layout of {place}, and the type name does not tell")),
                None => Ok(()),
            }
        };
        match self {
            TypeExpr::Option(t) | TypeExpr::NicheOption(t, _) => t.check_variable(),
            TypeExpr::Vec(t) => unknown(t, "a Vec"),
            TypeExpr::Array(t, _) => unknown(t, "an array"),
            TypeExpr::Tuple(ts, legacy) => {
                if !legacy && self.fixed_width().is_none() {
                    for t in &ts[..ts.len().saturating_sub(1)] {
                        unknown(t, "a redb 3.x/4.x tuple")?;
                    }
                }
                ts.iter().try_for_each(|t| t.check_variable())
            }
            _ => Ok(()),
        }
    }

    /// Whether any tuple inside is laid out differently by redb <= 2.x and >= 3.0
    /// (a variable-width tuple of two or more elements).
    pub fn has_layout(&self) -> bool {
        match self {
            TypeExpr::Tuple(ts, _) => {
                (ts.len() > 1 && self.fixed_width().is_none()) || ts.iter().any(|t| t.has_layout())
            }
            TypeExpr::Option(t)
            | TypeExpr::NicheOption(t, _)
            | TypeExpr::Vec(t)
            | TypeExpr::Array(t, _) => t.has_layout(),
            _ => false,
        }
    }

    /// Re-lay a stored value of this type (in this type's tuple layout) in the
    /// other layout (`to_legacy`): what redb <= 2.x or >= 3.0 would have written.
    pub fn relayout(&self, d: &[u8], to_legacy: bool) -> Result<Vec<u8>, String> {
        Ok(match self {
            TypeExpr::Option(t) => match d.first() {
                Some(1) => {
                    let mut out = vec![1u8];
                    out.extend(t.relayout(&d[1..], to_legacy)?);
                    out
                }
                Some(0) => d.to_vec(),
                _ => return Err("an Option with a bad tag".into()),
            },
            TypeExpr::NicheOption(t, niche) if d != niche.as_slice() => t.relayout(d, to_legacy)?,
            TypeExpr::Array(t, n) => {
                let parts = split_array(t, *n, d)?;
                let parts = parts
                    .into_iter()
                    .map(|p| t.relayout(p, to_legacy))
                    .collect::<Result<Vec<_>, _>>()?;
                join_array(t, parts)
            }
            TypeExpr::Vec(t) => {
                let mut pos = 0;
                let n = varint(d, &mut pos)?;
                let mut out = Vec::with_capacity(d.len());
                put_varint(n, &mut out);
                for _ in 0..n {
                    let len = match t.fixed_width() {
                        Some(w) => w,
                        None => varint(d, &mut pos)?,
                    };
                    let e = d
                        .get(pos..pos + len)
                        .ok_or("a stored Vec shorter than its lengths")?;
                    pos += len;
                    let e = t.relayout(e, to_legacy)?;
                    if t.fixed_width().is_none() {
                        put_varint(e.len(), &mut out);
                    }
                    out.extend(e);
                }
                out
            }
            TypeExpr::Tuple(ts, legacy) => {
                let parts = split_tuple(ts, *legacy, d)?;
                let parts = ts
                    .iter()
                    .zip(parts)
                    .map(|(t, p)| t.relayout(p, to_legacy))
                    .collect::<Result<Vec<_>, _>>()?;
                join_tuple(ts, to_legacy, self.fixed_width().is_some(), parts)
            }
            _ => d.to_vec(),
        })
    }
}

fn varint(data: &[u8], pos: &mut usize) -> Result<usize, String> {
    let short = || "a truncated length in a stored tuple".to_string();
    let b = *data.get(*pos).ok_or_else(short)?;
    let (v, n) = match b {
        0..=253 => (b as usize, 1),
        254 => (
            u16::from_le_bytes(
                data.get(*pos + 1..*pos + 3)
                    .ok_or_else(short)?
                    .try_into()
                    .unwrap(),
            ) as usize,
            3,
        ),
        255 => (
            u32::from_le_bytes(
                data.get(*pos + 1..*pos + 5)
                    .ok_or_else(short)?
                    .try_into()
                    .unwrap(),
            ) as usize,
            5,
        ),
    };
    *pos += n;
    Ok(v)
}

fn put_varint(len: usize, out: &mut Vec<u8>) {
    if len < 254 {
        out.push(len as u8);
    } else if len <= u16::MAX as usize {
        out.push(254);
        out.extend_from_slice(&(len as u16).to_le_bytes());
    } else {
        out.push(255);
        out.extend_from_slice(&(len as u32).to_le_bytes());
    }
}

fn split_tuple<'a>(ts: &[TypeExpr], legacy: bool, d: &'a [u8]) -> Result<Vec<&'a [u8]>, String> {
    let k = ts.len();
    let bad = || "a stored tuple shorter than its lengths".to_string();
    if k == 1 {
        return Ok(vec![d]);
    }
    let fixed: Option<usize> = ts.iter().map(|t| t.fixed_width()).sum();
    let mut lens = Vec::with_capacity(k);
    let mut pos = 0usize;
    if fixed.is_some() {
        for t in ts {
            lens.push(t.fixed_width().unwrap());
        }
    } else if legacy {
        for _ in 0..k - 1 {
            let b = d.get(pos..pos + 4).ok_or_else(bad)?;
            lens.push(u32::from_le_bytes(b.try_into().unwrap()) as usize);
            pos += 4;
        }
    } else {
        for t in &ts[..k - 1] {
            match t.fixed_width() {
                Some(w) => lens.push(w),
                None => lens.push(varint(d, &mut pos)?),
            }
        }
    }
    let mut out = Vec::with_capacity(k);
    for (i, len) in lens.iter().enumerate().take(k - 1) {
        let _ = i;
        out.push(d.get(pos..pos + len).ok_or_else(bad)?);
        pos += len;
    }
    if fixed.is_some() {
        out.push(d.get(pos..pos + lens[k - 1]).ok_or_else(bad)?);
    } else {
        out.push(d.get(pos..).ok_or_else(bad)?);
    }
    Ok(out)
}

fn join_tuple(ts: &[TypeExpr], legacy: bool, fixed: bool, parts: Vec<Vec<u8>>) -> Vec<u8> {
    let k = parts.len();
    let mut out = Vec::new();
    if k > 1 && !fixed {
        for (t, p) in ts.iter().zip(&parts).take(k - 1) {
            if legacy {
                out.extend_from_slice(&(p.len() as u32).to_le_bytes());
            } else if t.fixed_width().is_none() {
                put_varint(p.len(), &mut out);
            }
        }
    }
    for p in parts {
        out.extend(p);
    }
    out
}

fn split_array<'a>(t: &TypeExpr, n: usize, d: &'a [u8]) -> Result<Vec<&'a [u8]>, String> {
    let bad = || "a stored array shorter than its offsets".to_string();
    if let Some(w) = t.fixed_width() {
        return Ok((0..n).map(|i| &d[w * i..w * (i + 1)]).collect());
    }
    let mut start = 4 * n;
    let mut out = Vec::with_capacity(n);
    for i in 0..n {
        let b = d.get(4 * i..4 * i + 4).ok_or_else(bad)?;
        let end = u32::from_le_bytes(b.try_into().unwrap()) as usize;
        out.push(d.get(start..end).ok_or_else(bad)?);
        start = end;
    }
    Ok(out)
}

fn join_array(t: &TypeExpr, parts: Vec<Vec<u8>>) -> Vec<u8> {
    if t.fixed_width().is_some() {
        return parts.concat();
    }
    let n = parts.len();
    let mut out = vec![0u8; 4 * n];
    for (i, p) in parts.into_iter().enumerate() {
        out.extend(p);
        let end = out.len() as u32;
        out[4 * i..4 * i + 4].copy_from_slice(&end.to_le_bytes());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The fixed width of the type named `name`.
    fn width(name: &str) -> Option<usize> {
        TypeExpr::parse(name, false).unwrap().fixed_width()
    }

    #[test]
    fn parse_names() {
        assert_eq!(
            TypeExpr::parse("(u64,&str)", false),
            Some(TypeExpr::Tuple(
                vec![TypeExpr::UInt(8), TypeExpr::Bytes],
                false
            ))
        );
        assert_eq!(
            TypeExpr::parse("[u8;32]", false),
            Some(TypeExpr::FixedBytes(32))
        );
        assert_eq!(width("Option<(u8,[u16;2])>"), Some(6));
        assert_eq!(TypeExpr::parse("myapp::Id", false), None);
    }

    #[test]
    fn niche_options_sort_none_first_and_round_trip() {
        let t = TypeExpr::parse("niche::Option<bool>", false).unwrap();
        assert_eq!(t.fixed_width(), Some(1));
        let (none, f, tr) = (
            t.encode(&[0xff]).unwrap(),
            t.encode(&[0]).unwrap(),
            t.encode(&[1]).unwrap(),
        );
        assert!(none < f && f < tr);
        assert_eq!(t.decode(&none).unwrap(), vec![0xff]);
        let t = TypeExpr::parse("(u8,niche::Option<&str>)", false).unwrap();
        let stored = [7u8, 0xff];
        assert_eq!(
            t.decode(&t.encode(&stored).unwrap()).unwrap(),
            stored.to_vec()
        );
        assert_eq!(width("niche::Option<NonZeroU32>"), Some(4));
        assert_eq!(TypeExpr::parse("niche::Option<u32>", false), None);
        assert_eq!(TypeExpr::parse("niche::Option<app::T>", false), None);
    }

    #[test]
    fn custom_leaves_get_their_width_from_the_whole() {
        let all = |_: &str| true;
        let t = TypeExpr::parse_with("(BpNodeTxNo,u32)", false, &all)
            .unwrap()
            .resolve(Some(9))
            .unwrap();
        assert_eq!(
            t,
            TypeExpr::Tuple(
                vec![
                    TypeExpr::Custom("BpNodeTxNo".into(), Some(5)),
                    TypeExpr::UInt(4)
                ],
                false
            )
        );
        let t = TypeExpr::parse_with("[app::H;2]", false, &all)
            .unwrap()
            .resolve(Some(64))
            .unwrap();
        assert_eq!(t.fixed_width(), Some(64));
        assert!(TypeExpr::parse_with("(a::A,b::B)", false, &all)
            .unwrap()
            .resolve(Some(8))
            .is_err());
        // Variable width: fine where only the bytes matter, refused where the width changes the layout.
        assert!(TypeExpr::parse_with("(u32,a::A)", false, &all)
            .unwrap()
            .resolve(None)
            .is_ok());
        assert!(TypeExpr::parse_with("(a::A,&str)", true, &all)
            .unwrap()
            .resolve(None)
            .is_ok());
        assert!(TypeExpr::parse_with("(a::A,&str)", false, &all)
            .unwrap()
            .resolve(None)
            .is_err());
        assert_eq!(TypeExpr::parse_with("niche::Option<u8>", false, &all), None);
        // Order: the u32 after the user-defined bytes is compared as a number.
        let t = TypeExpr::parse_with("(T,u32)", false, &all)
            .unwrap()
            .resolve(Some(5))
            .unwrap();
        let (a, b) = ([9u8, 1, 0, 0, 0], [9u8, 0, 1, 0, 0]);
        assert!(t.encode(&a).unwrap() < t.encode(&b).unwrap());
    }

    #[test]
    fn round_trip_and_order() {
        let t = TypeExpr::parse("(i32,&str,u8)", false).unwrap();
        let mk = |a: i32, s: &str, c: u8| {
            let mut d = Vec::new();
            put_varint(s.len(), &mut d);
            d.extend_from_slice(&a.to_le_bytes());
            d.extend_from_slice(s.as_bytes());
            d.push(c);
            d
        };
        let vals = [
            mk(-5, "b", 1),
            mk(-5, "b\0", 0),
            mk(-1, "", 9),
            mk(0, "a", 0),
            mk(7, "a\0b", 3),
        ];
        let encs: Vec<Vec<u8>> = vals.iter().map(|v| t.encode(v).unwrap()).collect();
        for w in encs.windows(2) {
            assert!(w[0] < w[1]);
        }
        for (v, e) in vals.iter().zip(&encs) {
            assert_eq!(&t.decode(e).unwrap(), v);
        }
    }
}
