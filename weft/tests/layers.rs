//! Imports point down the layers of DESIGN.md only: no module of `weft/src` names a module of a
//! higher layer through a `crate::` path. Read from the sources, so a cycle between layers (such
//! as `tunables` → `boot` → `tunables`) fails here rather than in a review.

use std::path::{Path, PathBuf};

/// Bottom to top. `error`, `tunables` and `sync` are used by every layer, so they sit below
/// `sys` (`sync` wraps `sys`'s futex for loom, so it sits just above it); `runtime` holds the
/// engine and communicators for the rsmpi-shaped front end in `api`.
const LAYERS: &[&str] = &[
    "error", "tunables", "sys", "sync", "boot", "fabric", "engine", "comm", "coll", "rma",
    "runtime", "api",
];

/// Items the crate root re-exports from below the front end (`lib.rs`).
const ROOT_FROM_ERROR: &[&str] = &["Error", "ErrorClass", "Result"];

/// The front end's modules, which the crate root re-exports (`lib.rs`): `crate::datatype` is
/// `crate::api::datatype`.
const ROOT_FROM_API: &[&str] = &[
    "collective",
    "datatype",
    "environment",
    "point_to_point",
    "request",
    "topology",
    "traits",
    "window",
];

fn rank(layer: &str) -> usize {
    // Anything not in the table (the crate root's other re-exports, a new front-end module)
    // counts as the top: it may use everything, and nothing may use it.
    LAYERS
        .iter()
        .position(|&l| l == layer)
        .unwrap_or(LAYERS.len())
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).expect("reading weft/src") {
        let p = e.expect("a directory entry").path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// The top-level module every `crate::NAME` path in `code` names (comments left out).
fn crate_paths(code: &str) -> Vec<(usize, String)> {
    let mut found = Vec::new();
    for (i, line) in code.lines().enumerate() {
        let line = line.split("//").next().unwrap_or("");
        for (at, _) in line.match_indices("crate::") {
            let rest = &line[at + "crate::".len()..];
            let name: String = rest
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect();
            let layer = if ROOT_FROM_ERROR.contains(&name.as_str()) {
                "error".to_string()
            } else if ROOT_FROM_API.contains(&name.as_str()) {
                "api".to_string()
            } else {
                name
            };
            found.push((i + 1, layer));
        }
    }
    found
}

/// Every `crate::` path that points up a layer, as `file:line: from -> to`.
fn upward_imports(src: &Path) -> Vec<String> {
    let mut files = Vec::new();
    rust_files(src, &mut files);
    files.sort();
    let mut bad = Vec::new();
    for f in files {
        let rel = f.strip_prefix(src).expect("under src");
        let first = rel.components().next().expect("a path");
        let from = first
            .as_os_str()
            .to_string_lossy()
            .trim_end_matches(".rs")
            .to_string();
        if from == "lib" {
            continue;
        }
        let code = std::fs::read_to_string(&f).expect("reading a source file");
        for (line, to) in crate_paths(&code) {
            if to != from && rank(&to) > rank(&from) {
                bad.push(format!("{}:{line}: {from} -> {to}", rel.display()));
            }
        }
    }
    bad
}

#[test]
fn imports_point_down_the_layers() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let bad = upward_imports(&src);
    assert!(
        bad.is_empty(),
        "imports pointing up the layers {LAYERS:?}:\n{}",
        bad.join("\n")
    );
}

#[test]
fn an_upward_import_is_found() {
    let paths = crate_paths("use crate::boot::PmiChoice; // crate::api in a comment\n");
    assert_eq!(paths, [(1, "boot".to_string())]);
    assert!(rank("boot") > rank("tunables"));
    assert_eq!(
        crate_paths("x: crate::Result<()>")[0].1,
        "error",
        "the root's re-exports of error"
    );
}
