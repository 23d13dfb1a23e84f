//! `weft run --example NAME` / `--bin NAME`: build the target with cargo and find the
//! executable it produced (like `cargo run`, through `--message-format=json`).

use anyhow::{bail, Context};
use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Command, Stdio};

/// Which kind of cargo target to build.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// `--example NAME`
    Example,
    /// `--bin NAME`
    Bin,
}

impl Kind {
    fn flag(self) -> &'static str {
        match self {
            Kind::Example => "--example",
            Kind::Bin => "--bin",
        }
    }
    fn cargo_kind(self) -> &'static str {
        match self {
            Kind::Example => "example",
            Kind::Bin => "bin",
        }
    }
}

/// Runs `cargo build` for the target and returns the path of its executable. Cargo's own
/// diagnostics go to stderr as usual.
pub fn build(
    kind: Kind,
    name: &str,
    package: Option<&str>,
    release: bool,
) -> anyhow::Result<PathBuf> {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut cmd = Command::new(&cargo);
    cmd.args([
        "build",
        "--message-format=json-render-diagnostics",
        kind.flag(),
        name,
    ]);
    if let Some(p) = package {
        cmd.args(["-p", p]);
    }
    if release {
        cmd.arg("--release");
    }
    let shown = format!(
        "cargo build {} {name}{}{}",
        kind.flag(),
        package.map(|p| format!(" -p {p}")).unwrap_or_default(),
        if release { " --release" } else { "" }
    );
    let mut child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .stdin(Stdio::null())
        .spawn()
        .with_context(|| format!("starting {shown} (cargo at {cargo:?})"))?;
    let mut exe: Option<PathBuf> = None;
    let stdout = child.stdout.take().expect("stdout was piped");
    for line in BufReader::new(stdout).lines() {
        let line = line.with_context(|| format!("reading the output of {shown}"))?;
        let Ok(msg) = serde_json::from_str::<serde_json::Value>(&line) else {
            continue;
        };
        if msg["reason"] != "compiler-artifact" || msg["target"]["name"] != name {
            continue;
        }
        let is_kind = msg["target"]["kind"]
            .as_array()
            .is_some_and(|k| k.iter().any(|k| k == kind.cargo_kind()));
        if let (true, Some(path)) = (is_kind, msg["executable"].as_str()) {
            exe = Some(PathBuf::from(path));
        }
    }
    let status = child
        .wait()
        .with_context(|| format!("waiting for {shown}"))?;
    if !status.success() {
        bail!("{shown} failed ({status})");
    }
    match exe {
        Some(p) => Ok(p),
        None => bail!("{shown} succeeded but reported no executable for {name:?}"),
    }
}
