//! The C ABI (weft-abi: `libmpi_abi.so.1`, `mpi.h`) as C programs see it: laid out by
//! `weft install`, compiled by its `mpicc`, run by `weft run` and `mpiexec`; bad arguments
//! and unsupported functions through the error handlers; a profiling layer interposing
//! `MPI_Send` over the `PMPI_` names; every function of the standard exported; our `mpi.h`
//! against MPICH's `mpi_abi.h`, constant by constant; and programs compiled by MPICH 5's
//! `mpicc_abi` running on Weft unchanged; and a Rust program calling the same functions
//! through `weft::ffi` on the runtime its Rust API started.

mod common;

use common::*;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

/// MPICH 5's prefix (scripts/install-newer-peers.sh); `None`, with a message, when it is
/// not installed, which fails the test when CI requires it (WEFT_REQUIRE_MPICH_ABI).
fn mpich5() -> Option<PathBuf> {
    let dir = std::env::var_os("WEFT_PEERS_DIR").map_or("/opt/weft-peers".into(), PathBuf::from);
    let mpich5 = dir.join("mpich5");
    if mpich5.join("bin/mpicc_abi").is_file() {
        return Some(mpich5);
    }
    assert!(
        std::env::var_os("WEFT_REQUIRE_MPICH_ABI").is_none(),
        "MPICH 5 is required here (WEFT_REQUIRE_MPICH_ABI) but not installed"
    );
    eprintln!("skipped: MPICH 5 not installed (scripts/install-newer-peers.sh)");
    None
}

/// Builds the C ABI (same profile as this weft) and lays out a prefix with `weft install`,
/// once per test process.
fn prefix() -> &'static Path {
    static PREFIX: OnceLock<PathBuf> = OnceLock::new();
    PREFIX.get_or_init(|| {
        let mut cargo = Command::new(env!("CARGO"));
        cargo.args(["build", "--quiet", "-p", "weft-abi"]);
        let weft_exe = Path::new(env!("CARGO_BIN_EXE_weft"));
        if weft_exe.parent().and_then(|p| p.file_name()) == Some("release".as_ref()) {
            cargo.arg("--release");
        }
        let out = run_build(cargo, "cargo build -p weft-abi");
        assert_eq!(out.code, Some(0), "{out:?}");
        let prefix = Path::new(env!("CARGO_TARGET_TMPDIR")).join("c-prefix");
        let mut install = weft();
        install.args(["install", "--prefix"]).arg(&prefix);
        let out = run(install, "weft install");
        assert_eq!(out.code, Some(0), "{out:?}");
        prefix
    })
}

fn run_build(mut cmd: Command, what: &str) -> Out {
    let child = cmd
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("starting {what}: {e}"));
    finish(child, BUILD_WATCHDOG, what)
}

fn source(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/c/abi")
        .join(name)
}

/// Compiles `src` with `compiler` (extra arguments after the source) into the test's
/// directory as `exe`.
fn compile(compiler: &Path, src: &str, exe: &str, extra: &[&str]) -> PathBuf {
    let out_path = Path::new(env!("CARGO_TARGET_TMPDIR")).join(exe);
    let mut cc = Command::new(compiler);
    cc.args(["-O2", "-Wall", "-Werror", "-o"])
        .arg(&out_path)
        .arg(source(src))
        .args(extra);
    let out = run_build(cc, &format!("{} {src}", compiler.display()));
    assert_eq!(out.code, Some(0), "{out:?}");
    out_path
}

fn weft_run(n: u32, exe: &Path, args: &[&str]) -> Out {
    let mut c = weft();
    c.args(["run", "-n", &n.to_string()]).arg(exe).args(args);
    run(c, &format!("weft run -n {n} {}", exe.display()))
}

fn assert_every_rank(out: &Out, n: u32, line: impl Fn(u32) -> String) {
    assert_eq!(out.code, Some(0), "{out:?}");
    for r in 0..n {
        assert!(out.stdout.contains(&line(r)), "no {:?} in {out:?}", line(r));
    }
}

#[test]
fn a_rust_program_calls_the_c_functions_through_weft_ffi_on_the_runtime_it_started() {
    let exe = build_example("weft", "ffi_mixed", true);
    for (n, transports) in [(1, "shm"), (3, "shm"), (3, "tcp")] {
        let mut c = weft();
        c.args(["run", "-n", &n.to_string(), "--timeout", "120"])
            .arg(&exe)
            .env("WEFT_TRANSPORTS", transports);
        let out = run(c, &format!("weft run -n {n} ffi_mixed over {transports}"));
        assert_eq!(out.code, Some(0), "{out:?}");
        assert_every_rank(&out, n, |r| format!("ffi_mixed: rank {r} of {n} ok"));
    }
}

#[test]
fn c_programs_built_by_our_mpicc_run_under_weft_run_and_mpiexec() {
    let mpicc = prefix().join("bin/mpicc");
    let exe = compile(&mpicc, "basics.c", "basics", &[]);
    for n in [1, 2, 3] {
        let out = weft_run(n, &exe, &[]);
        assert_every_rank(&out, n, |r| format!("basics: rank {r} of {n} ok"));
    }
    // mpiexec and mpirun are weft run under other names, with the usual spellings.
    for launcher in ["mpiexec", "mpirun"] {
        let mut c = Command::new(prefix().join("bin").join(launcher));
        c.args(["-np", "2", "-env", "WEFT_STATS", "1"]).arg(&exe);
        let out = run(c, launcher);
        assert_every_rank(&out, 2, |r| format!("basics: rank {r} of 2 ok"));
        assert!(
            out.stderr.contains("statistics"),
            "-env not passed: {out:?}"
        );
    }
    // The wrapper's -show prints the command it would run.
    let show = Command::new(&mpicc)
        .args(["-show", "x.c"])
        .output()
        .unwrap();
    let show = String::from_utf8_lossy(&show.stdout);
    assert!(show.contains("x.c") && show.contains("-lmpi_abi"), "{show}");
}

#[test]
fn nonblocking_point_to_point_probes_and_collectives_from_c() {
    let exe = compile(
        &prefix().join("bin/mpicc"),
        "nonblocking.c",
        "nonblocking",
        &[],
    );
    for n in [1, 2, 4] {
        let out = weft_run(n, &exe, &[]);
        assert_every_rank(&out, n, |r| format!("nonblocking: rank {r} of {n} ok"));
    }
}

#[test]
fn communicators_groups_attributes_info_persistent_requests_from_c() {
    let exe = compile(&prefix().join("bin/mpicc"), "objects.c", "objects", &[]);
    for n in [1, 3, 4] {
        let out = weft_run(n, &exe, &[]);
        assert_every_rank(&out, n, |r| format!("objects: rank {r} of {n} ok"));
    }
}

#[test]
fn intercommunicators_user_ops_collectives_topologies_and_error_handlers_from_c() {
    let exe = compile(
        &prefix().join("bin/mpicc"),
        "collectives.c",
        "collectives",
        &[],
    );
    for n in [1, 2, 3, 4] {
        let out = weft_run(n, &exe, &[]);
        assert_every_rank(&out, n, |r| format!("collectives: rank {r} of {n} ok"));
    }
}

#[test]
fn sessions_without_mpi_init_then_the_world_model_joining_from_c() {
    let exe = compile(&prefix().join("bin/mpicc"), "sessions.c", "sessions", &[]);
    for n in [1, 2, 3] {
        let out = weft_run(n, &exe, &[]);
        assert_every_rank(&out, n, |r| format!("sessions: rank {r} of {n} ok"));
    }
}

#[test]
fn ports_spawn_and_spawn_multiple_join_jobs_into_intercommunicators_from_c() {
    let exe = compile(&prefix().join("bin/mpicc"), "dynamic.c", "dynamic", &[]);
    // Oversubscribed on purpose: 3 parents, then 2 and 3 children, on 2 CPUs.
    for n in [1, 3] {
        let out = weft_run(n, &exe, &[]);
        assert_every_rank(&out, n, |r| format!("dynamic: rank {r} of {n} ok"));
        for r in 0..2 {
            let child = format!("dynamic child: rank {r} of 2 (appnum 0) ok");
            assert!(out.stdout.contains(&child), "no {child:?} in {out:?}");
        }
        for (r, app) in [(0, 0), (1, 1), (2, 1)] {
            let child = format!("dynamic child: rank {r} of 3 (appnum {app}) ok");
            assert!(out.stdout.contains(&child), "no {child:?} in {out:?}");
        }
        assert!(
            out.stderr
                .contains("cannot find program /nonexistent/weft-test-program"),
            "{out:?}"
        );
    }
}

#[test]
fn derived_datatypes_constructors_pack_and_non_contiguous_communication_from_c() {
    let exe = compile(&prefix().join("bin/mpicc"), "datatypes.c", "datatypes", &[]);
    for n in [1, 2, 3] {
        let out = weft_run(n, &exe, &[]);
        assert_every_rank(&out, n, |r| format!("datatypes: rank {r} of {n} ok"));
    }
}

#[test]
fn windows_in_every_flavour_with_every_synchronization_and_their_errors_from_c() {
    let exe = compile(&prefix().join("bin/mpicc"), "windows.c", "windows", &[]);
    for n in [1, 2, 4] {
        let out = weft_run(n, &exe, &[]);
        assert_every_rank(&out, n, |r| format!("windows: rank {r} of {n} ok"));
    }
}

#[test]
fn calls_from_several_threads_one_at_a_time_work_serialized() {
    let exe = compile(
        &prefix().join("bin/mpicc"),
        "threads.c",
        "threads",
        &["-lpthread"],
    );
    for n in [1, 3] {
        let out = weft_run(n, &exe, &[]);
        assert_every_rank(&out, n, |r| format!("threads: rank {r} of {n} ok"));
    }
}

#[test]
fn bad_arguments_get_the_standards_error_classes_and_fatal_ends_the_job() {
    let exe = compile(&prefix().join("bin/mpicc"), "errors.c", "errors", &[]);
    let out = weft_run(2, &exe, &["return"]);
    assert_every_rank(&out, 2, |r| format!("errors: rank {r} ok"));
    // MPI_ERRORS_ARE_FATAL (the default): rank 1's bad send ends the job, naming the call
    // and the values; rank 0, waiting in a barrier, does not hang.
    let out = weft_run(3, &exe, &["fatal"]);
    assert_ne!(out.code, Some(0), "{out:?}");
    assert!(
        out.stderr.contains(
            "MPI_Send: the destination rank 8 is outside the communicator (size 3) (MPI_ERR_RANK)"
        ),
        "{out:?}"
    );
}

#[test]
fn a_profiling_layer_interposes_mpi_send_over_pmpi() {
    let prefix = prefix();
    let lib = Path::new(env!("CARGO_TARGET_TMPDIR")).join("libinterpose.so");
    let mut cc = Command::new(prefix.join("bin/mpicc"));
    cc.args(["-shared", "-fPIC", "-O2", "-Wall", "-Werror", "-o"])
        .arg(&lib)
        .arg(source("interpose.c"));
    let out = run_build(cc, "mpicc -shared interpose.c");
    assert_eq!(out.code, Some(0), "{out:?}");
    // Linked before libmpi_abi (mpicc puts the library last), as profiling layers are. The
    // program sends twice: to the next rank and to MPI_PROC_NULL; the last rank twice more
    // (on a communicator that numbers the world backwards).
    let exe = compile(
        &prefix.join("bin/mpicc"),
        "basics.c",
        "basics_profiled",
        &[lib.to_str().unwrap()],
    );
    let out = weft_run(3, &exe, &[]);
    assert_every_rank(&out, 3, |r| format!("basics: rank {r} of 3 ok"));
    for (r, sends) in [(0, 2), (1, 2), (2, 4)] {
        assert!(
            out.stdout
                .contains(&format!("interpose: rank {r} made {sends} sends")),
            "{out:?}"
        );
    }
}

/// The dynamic symbols of `lib`: (kind letter, name).
fn dynamic_symbols(lib: &Path) -> Vec<(String, String)> {
    let out = Command::new("nm")
        .args(["-D", "--defined-only"])
        .arg(lib)
        .output()
        .expect("nm");
    assert!(out.status.success(), "nm -D {}", lib.display());
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| {
            let mut f = l.split_whitespace().rev();
            let name = f.next()?.to_string();
            Some((f.next()?.to_string(), name))
        })
        .collect()
}

#[test]
fn every_function_of_the_standard_is_exported_weak_over_strong_and_nothing_else() {
    let lib = prefix().join("lib/libmpi_abi.so.1");
    let symbols = dynamic_symbols(&lib);
    let functions = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../weft/abi/functions.txt"),
    )
    .unwrap();
    let mut count = 0;
    for proto in functions.lines() {
        let name = proto[..proto.find('(').unwrap()]
            .rsplit(' ')
            .next()
            .unwrap();
        let kind = |n: &str| {
            symbols
                .iter()
                .find(|(_, s)| s == n)
                .map(|(k, _)| k.as_str())
        };
        assert_eq!(
            kind(name),
            Some("W"),
            "{name} is not a weak symbol of {}",
            lib.display()
        );
        assert_eq!(
            kind(&format!("P{name}")),
            Some("T"),
            "P{name} is not a strong symbol"
        );
        count += 1;
    }
    assert!(count > 600, "only {count} functions listed");
    let others: Vec<_> = symbols
        .iter()
        .filter(|(_, s)| !s.starts_with("MPI_") && !s.starts_with("PMPI_"))
        .collect();
    assert!(others.is_empty(), "exported beyond MPI_/PMPI_: {others:?}");
    let readelf = Command::new("readelf")
        .args(["-d"])
        .arg(&lib)
        .output()
        .expect("readelf");
    assert!(
        String::from_utf8_lossy(&readelf.stdout).contains("[libmpi_abi.so.1]"),
        "soname is not libmpi_abi.so.1"
    );
}

/// The names MPICH's `mpi_abi.h` defines as constants or enumerators (`#define MPI_X` and
/// `MPI_X = ...`), but not its header guard and configuration macros.
fn mpich_constant_names(header: &str) -> Vec<String> {
    let mut names = Vec::new();
    for line in header.lines() {
        let line = line.trim();
        let name = if let Some(rest) = line.strip_prefix("#define ") {
            rest.split_whitespace().next()
        } else if line.starts_with("MPI_") && line.contains('=') {
            line.split(|c: char| c.is_whitespace() || c == '=').next()
        } else {
            None
        };
        if let Some(n) = name {
            let config = n == "MPI_H_ABI" || (n.starts_with("MPI_ABI_") && !n.ends_with("VERSION"));
            if n.starts_with("MPI_") && !n.contains('(') && !config && !names.iter().any(|x| x == n)
            {
                names.push(n.to_string());
            }
        }
    }
    names
}

#[test]
fn our_header_gives_every_constant_mpichs_abi_header_gives_the_same_value() {
    let Some(mpich5) = mpich5() else {
        return;
    };
    let theirs = std::fs::read_to_string(mpich5.join("include/mpi_abi.h")).unwrap();
    let names = mpich_constant_names(&theirs);
    assert!(
        names.len() > 300,
        "only {} names found in mpi_abi.h",
        names.len()
    );
    // One program printing every value, compiled against each header.
    let mut c = String::from(
        "#include <mpi.h>\n#include <stdio.h>\n#include <stdint.h>\nint main(void) {\n",
    );
    for n in &names {
        c += &format!("    printf(\"%s %lld\\n\", \"{n}\", (long long)(intptr_t)({n}));\n");
    }
    c += "    printf(\"sizeof(MPI_Status) %zu\\n\", sizeof(MPI_Status));\n    return 0;\n}\n";
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR"));
    let src = dir.join("abi_constants.c");
    std::fs::write(&src, c).unwrap();
    let mut outputs = Vec::new();
    for (label, include) in [
        ("weft", prefix().join("include")),
        ("mpich", mpich5.join("include")),
    ] {
        let exe = dir.join(format!("abi_constants_{label}"));
        // MPICH's mpi.h is its native header; its ABI header is mpi_abi.h: include it as mpi.h.
        let shim = dir.join(format!("abi_include_{label}"));
        std::fs::create_dir_all(&shim).unwrap();
        let header = if label == "weft" {
            include.join("mpi.h")
        } else {
            include.join("mpi_abi.h")
        };
        std::fs::copy(&header, shim.join("mpi.h")).unwrap();
        let mut cc = Command::new("cc");
        cc.arg("-I").arg(&shim).arg("-o").arg(&exe).arg(&src);
        let out = run_build(cc, &format!("cc abi_constants.c against {label}'s header"));
        assert_eq!(out.code, Some(0), "{out:?}");
        let printed = Command::new(&exe).output().unwrap();
        outputs.push(String::from_utf8_lossy(&printed.stdout).into_owned());
    }
    let differ: Vec<_> = outputs[0]
        .lines()
        .zip(outputs[1].lines())
        .filter(|(a, b)| a != b)
        .collect();
    assert!(differ.is_empty(), "weft / mpich differ: {differ:#?}");
    assert_eq!(outputs[0].lines().count(), names.len() + 1);
}

#[test]
fn programs_built_by_mpichs_mpicc_abi_run_on_weft_unchanged() {
    let Some(mpich5) = mpich5() else {
        return;
    };
    let exe = compile(
        &mpich5.join("bin/mpicc_abi"),
        "basics.c",
        "basics_mpich_abi",
        &[],
    );
    let lib = prefix().join("lib");
    // MPICH's wrapper links with RUNPATH to its own libmpi_abi.so.1; LD_LIBRARY_PATH comes
    // first, so the same binary runs on Weft.
    for n in [1, 3] {
        let mut c = weft();
        c.args(["run", "-n", &n.to_string(), "-x"])
            .arg(format!("LD_LIBRARY_PATH={}", lib.display()))
            .arg(&exe);
        let out = run(c, &format!("weft run -n {n} basics_mpich_abi"));
        assert_every_rank(&out, n, |r| format!("basics: rank {r} of {n} ok"));
    }
}

#[test]
fn weft_info_abi_lists_the_functions_not_supported_yet() {
    let mut c = weft();
    c.args(["info", "--abi"]);
    let out = run(c, "weft info --abi");
    assert_eq!(out.code, Some(0), "{out:?}");
    let listed: Vec<&str> = out
        .stdout
        .lines()
        .filter_map(|l| l.strip_prefix("  "))
        .collect();
    assert!(listed.contains(&"MPI_File_delete"), "{out:?}");
    assert!(
        !listed.contains(&"MPI_Send") && !listed.contains(&"MPI_Init"),
        "{out:?}"
    );
    // Each one listed is a stub: called, it raises MPI_ERR_UNSUPPORTED_OPERATION (checked
    // for MPI_File_delete by errors.c); the count line agrees with the list.
    let total = listed.len();
    assert!(
        out.stdout.contains(&format!("Not supported yet ({total};")),
        "{out:?}"
    );
}
