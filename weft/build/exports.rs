// Which functions of the standard the C ABI (weft/src/c_abi) implements: shared by weft's build
// script (which re-exports their bodies under their C names in `weft::ffi`), weft-abi's (which
// exports the symbols and makes stubs for the others) and weft-cli's (`weft info --abi`), so
// all three agree.

/// `(name, implemented)` for every function of `abi/functions.txt`, in its order; `weft` is
/// the weft crate's directory.
#[allow(dead_code)]
pub fn functions(weft: &std::path::Path) -> Vec<(String, bool)> {
    let implemented: std::collections::BTreeSet<String> =
        bodies(weft).into_iter().map(|b| b.name).collect();
    prototypes(weft)
        .into_iter()
        .map(|(name, _)| {
            let short = name.strip_prefix("MPI_").unwrap().to_string();
            let on = implemented.contains(&short);
            (name, on)
        })
        .collect()
}

/// `(name, C prototype)` for every function of `abi/functions.txt`, in its order.
pub fn prototypes(weft: &std::path::Path) -> Vec<(String, String)> {
    let list = std::fs::read_to_string(weft.join("abi/functions.txt")).unwrap();
    list.lines()
        .map(|proto| {
            let name = proto[..proto.find('(').unwrap()]
                .rsplit(' ')
                .next()
                .unwrap();
            (name.to_string(), proto.to_string())
        })
        .collect()
}

/// One `export!(Name, body)` line of the C ABI's sources.
#[allow(dead_code)]
pub struct Body {
    /// The function's name without `MPI_`.
    pub name: String,
    /// The body's path from the crate root (`crate::c_abi::p2p::send`).
    pub path: String,
}

/// Every `export!(Name, body)` line under `weft/src/c_abi`, sorted by name.
pub fn bodies(weft: &std::path::Path) -> Vec<Body> {
    let mut out = Vec::new();
    scan(&weft.join("src/c_abi"), "crate::c_abi", &mut out);
    out.sort_by(|a, b| a.name.cmp(&b.name));
    out
}

fn scan(dir: &std::path::Path, module: &str, out: &mut Vec<Body>) {
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    entries.sort();
    for path in entries {
        let stem = path.file_stem().unwrap().to_str().unwrap().to_string();
        if path.is_dir() {
            scan(&path, &format!("{module}::{stem}"), out);
            continue;
        }
        if path.extension().is_none_or(|e| e != "rs") {
            continue;
        }
        let here = if stem == "mod" {
            module.to_string()
        } else {
            format!("{module}::{stem}")
        };
        for line in std::fs::read_to_string(&path).unwrap().lines() {
            let Some(rest) = line.trim_start().strip_prefix("export!(") else {
                continue;
            };
            let Some((name, body)) = rest.trim_end_matches(");").split_once(',') else {
                continue;
            };
            let (name, body) = (name.trim(), body.trim());
            // The macro's own definition and macro bodies (`$name`) are not exports.
            if name.is_empty() || !name.chars().all(|c| c.is_alphanumeric() || c == '_') {
                continue;
            }
            out.push(Body {
                name: name.to_string(),
                path: format!("{here}::{body}"),
            });
        }
    }
}
