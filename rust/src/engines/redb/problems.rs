//! Why a writer cannot write a table as described, found before anything is created.
use super::desc::{TableDesc, TypeDesc};
use super::plan::{is_composite, legacy_tuples, plan, Kind};
use super::types::TypeExpr;
use super::write::target_desc;

pub fn problems(format: u8, redb2: bool, d: &TableDesc) -> Vec<(String, String, String)> {
    let (t, relayout) = target_desc(format, redb2, d);
    let mut out = Vec::new();
    let p = plan(format, &t);
    for (i, (part, ty)) in [("key", &t.key), ("value", &t.value)]
        .into_iter()
        .enumerate()
    {
        let mut why = Vec::new();
        let writable = match ty.class.as_str() {
            "Internal" | "UserDefined" => true,
            "Internal2" | "Internal3" => !redb2,
            _ => false,
        };
        if !writable {
            let by = if redb2 {
                "redb 2.6, which writes this file,"
            } else {
                "this redb"
            };
            why.push(format!(
                "its classification {} cannot be written by {by}",
                ty.class
            ));
        }
        let ordered = i == 0 || t.multimap;
        let raw = if i == 0 {
            p.key.is_none()
        } else {
            p.value.is_none()
        };
        if ordered && raw && p.kind == Kind::Custom {
            why.extend(order_problem(format, &t, ty));
        }
        match &relayout[i] {
            // A custom-order table's records are its stored bytes: re-laid, they would
            // no longer be the source's records (and no verification could pass).
            Some(_) if ordered && raw => why.push(
                "changes its tuple layout in this file format, and the records of a custom-order table are its stored bytes; convert it in its own file format (no --redb-format)".to_string(),
            ),
            Some((Err(e), _)) if !ordered => why.push(format!(
                "cannot have its tuples re-laid for this file format ({e}); in its own file format (no --redb-format) it needs no re-laying"
            )),
            _ => {}
        }
        out.extend(
            why.into_iter()
                .map(|w| (part.to_string(), ty.name.clone(), w)),
        );
    }
    out
}

/// Why the order of a custom-order part cannot be known, if it cannot.
fn order_problem(format: u8, d: &TableDesc, t: &TypeDesc) -> Option<String> {
    let asserted = |n: &str| d.bytewise.iter().any(|b| b == n);
    if asserted(&t.name) {
        return None;
    }
    if !is_composite(&t.name) {
        return Some(if t.class == "UserDefined" {
            format!("is user-defined and its order may not be bytewise; if it is, pass --bytewise-key '{}'", t.name)
        } else {
            "is a type the redb writer cannot produce".to_string()
        });
    }
    let Some(e) = TypeExpr::parse_with(&t.name, legacy_tuples(format, t), &|_| true) else {
        return Some("is a type the redb writer cannot produce".to_string());
    };
    let mut unasserted: Vec<&str> = e.customs().into_iter().filter(|n| !asserted(n)).collect();
    unasserted.sort_unstable();
    unasserted.dedup();
    if !unasserted.is_empty() {
        let opts: Vec<String> = unasserted
            .iter()
            .map(|n| format!("--bytewise-key '{n}'"))
            .collect();
        return Some(format!(
            "holds user-defined {} whose order may not be bytewise; if it is, pass {}",
            unasserted.join(", "),
            opts.join(" ")
        ));
    }
    e.resolve(t.width).err().map(|why| {
        format!("its order cannot be known ({why}); if the whole type's order is bytewise, pass --bytewise-key '{}'", t.name)
    })
}
