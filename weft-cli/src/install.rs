//! `weft install --prefix DIR`: lays out what a C user needs under one prefix, as MPICH's and
//! Open MPI's installations do: `bin/` (weft, mpiexec and mpirun as other names of it, the
//! `mpicc`/`mpicxx` wrappers), `lib/` (`libmpi_abi.so.1`, the `libmpi_abi.so` link name,
//! `pkgconfig/mpi.pc`) and `include/mpi.h`.
//!
//! The library comes from beside this `weft` (cargo builds both into `target/<profile>/`); the
//! header is built into `weft`.

use anyhow::{bail, Context};
use std::os::unix::fs::{symlink, PermissionsExt};
use std::path::{Path, PathBuf};

/// The C ABI's header (generated from the standard; see weft-abi/gen/generate.py).
const MPI_H: &str = include_str!("../../weft-abi/include/mpi.h");

#[derive(clap::Args, Debug)]
pub struct InstallArgs {
    /// Where to lay out bin/, lib/ and include/ (made if missing; files there are replaced).
    #[arg(long, value_name = "DIR")]
    prefix: PathBuf,
}

pub fn run(args: &InstallArgs) -> anyhow::Result<u8> {
    let exe = std::env::current_exe().context("finding this weft")?;
    let built = exe.parent().context("the directory of this weft")?;
    let library = built.join("libmpi_abi.so");
    if !library.is_file() {
        bail!(
            "{} is missing: build the C ABI first (cargo build --release -p weft-abi)",
            library.display()
        );
    }
    std::fs::create_dir_all(&args.prefix)
        .with_context(|| format!("making {}", args.prefix.display()))?;
    let prefix = args
        .prefix
        .canonicalize()
        .with_context(|| format!("resolving {}", args.prefix.display()))?;
    let (bin, lib, include) = (
        prefix.join("bin"),
        prefix.join("lib"),
        prefix.join("include"),
    );
    for dir in [&bin, &lib, &include, &lib.join("pkgconfig")] {
        std::fs::create_dir_all(dir).with_context(|| format!("making {}", dir.display()))?;
    }
    copy(&exe, &bin.join("weft"))?;
    for name in ["mpiexec", "mpirun"] {
        link("weft", &bin.join(name))?;
    }
    write(
        &bin.join("mpicc"),
        &wrapper("mpicc", "MPICC_CC", "cc"),
        0o755,
    )?;
    write(
        &bin.join("mpicxx"),
        &wrapper("mpicxx", "MPICXX_CXX", "c++"),
        0o755,
    )?;
    copy(&library, &lib.join("libmpi_abi.so.1"))?;
    link("libmpi_abi.so.1", &lib.join("libmpi_abi.so"))?;
    write(&include.join("mpi.h"), MPI_H, 0o644)?;
    write(
        &lib.join("pkgconfig").join("mpi.pc"),
        &pkg_config(&prefix),
        0o644,
    )?;
    println!("weft install: {} (bin, lib, include)", prefix.display());
    Ok(0)
}

fn copy(from: &Path, to: &Path) -> anyhow::Result<()> {
    // Replace, not overwrite in place: a running program may have the old file mapped.
    let _ = std::fs::remove_file(to);
    std::fs::copy(from, to)
        .with_context(|| format!("copying {} to {}", from.display(), to.display()))?;
    Ok(())
}

fn link(target: &str, at: &Path) -> anyhow::Result<()> {
    let _ = std::fs::remove_file(at);
    symlink(target, at).with_context(|| format!("linking {} to {target}", at.display()))
}

fn write(path: &Path, text: &str, mode: u32) -> anyhow::Result<()> {
    let _ = std::fs::remove_file(path);
    std::fs::write(path, text).with_context(|| format!("writing {}", path.display()))?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))
        .with_context(|| format!("setting the mode of {}", path.display()))
}

/// A compiler wrapper (POSIX sh): the prefix is found from the script's own place, so the
/// tree can be moved. `-show` prints the command instead of running it (MPICH's spelling);
/// `-showme`, `-showme:compile` and `-showme:link` are Open MPI's; `$override` picks the
/// compiler (default `default_cc`).
fn wrapper(name: &str, override_var: &str, default_cc: &str) -> String {
    format!(
        r#"#!/bin/sh
# {name}: compiles and links with Weft's MPI (the MPI 5.0 standard ABI, libmpi_abi.so.1).
# Made by `weft install`. The compiler: ${override_var} (default {default_cc}).
prefix=$(cd "$(dirname "$0")/.." && pwd)
cc=${{{override_var}:-{default_cc}}}
compile="-I$prefix/include"
link="-L$prefix/lib -lmpi_abi -Wl,-rpath,$prefix/lib"
case "$1" in
    -show|-showme)
        shift
        echo "$cc $compile $* $link"
        exit 0 ;;
    -showme:compile|-compile_info)
        echo "$compile"
        exit 0 ;;
    -showme:link|-link_info)
        echo "$link"
        exit 0 ;;
esac
exec $cc $compile "$@" $link
"#
    )
}

fn pkg_config(prefix: &Path) -> String {
    format!(
        "prefix={}\nincludedir=${{prefix}}/include\nlibdir=${{prefix}}/lib\n\n\
         Name: mpi\nDescription: Weft's MPI (the MPI 5.0 standard ABI)\nVersion: {}\n\
         Cflags: -I${{includedir}}\nLibs: -L${{libdir}} -lmpi_abi -Wl,-rpath,${{libdir}}\n",
        prefix.display(),
        env!("CARGO_PKG_VERSION")
    )
}
