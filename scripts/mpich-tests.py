#!/usr/bin/env python3
"""Runs MPICH's C test suite (../shared/suites/mpich-test, used as it is) on Weft's C ABI.

Lays out Weft's C tools with `weft install`, builds the suite's test framework (util/ and
dtpools/) and each test of a directory's testlist with Weft's mpicc, runs each entry with its
process count, arguments and environment under `weft run` with a time limit, and judges it
as MPICH's own `runtests` does: a pass prints ` No Errors` (or `Test Skipped`), nothing else,
and exits 0; entries marked `resultTest=TestStatus`/`TestErrFatal` pass by exiting nonzero.
Prints `N passed, N failed` per directory and in total.

Known failures live in scripts/mpich-known-failures.txt, one entry a line with its reason. A
failure not listed there, or a listed entry that now passes (the list only shrinks), makes
the run fail; `--update-known` rewrites the list from this run instead (reasons taken from
what each failing test printed).

    python3 scripts/mpich-tests.py                      # the issue's directories
    python3 scripts/mpich-tests.py --dirs pt2pt,coll    # some
    python3 scripts/mpich-tests.py --dirs pt2pt --only sendrecv2 -v
"""
import argparse
import concurrent.futures
import os
import pathlib
import re
import shlex
import subprocess
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parent.parent


def find_suite():
    """The suite: $WEFT_MPICH_SUITE, else ../shared/suites/mpich-test beside the project,
    else the workplace's /work/shared/suites/mpich-test."""
    candidates = [os.environ.get("WEFT_MPICH_SUITE"),
                  ROOT.parent / "shared" / "suites" / "mpich-test",
                  "/work/shared/suites/mpich-test"]
    for c in candidates:
        if c and (pathlib.Path(c) / "util" / "mtest.c").exists():
            return pathlib.Path(c).resolve()
    return None


SUITE = find_suite()
KNOWN = ROOT / "scripts" / "mpich-known-failures.txt"
DEFAULT_DIRS = "basic,init,pt2pt,comm,group,attr,info,errhan,coll,topo,datatype,rma"

# basic/ has no testlist: its programs report by their exit status (MPICH's TestBench).
BASIC = [("simple", 2), ("self", 1), ("sendrecv", 2), ("srtest", 2), ("wtime", 1), ("patterns", 2)]

# What the suite's configure would find on this platform (include/mpitestconf.h).
CONF_H = """/* Written by weft's scripts/mpich-tests.py in place of the suite's configure. */
#ifndef MPITESTCONF_H_INCLUDED
#define MPITESTCONF_H_INCLUDED
#define HAVE_STRING_H 1
#define HAVE_STDLIB_H 1
#define HAVE_UNISTD_H 1
#define HAVE_STDARG_H 1
#define HAVE_SYS_TIME_H 1
#define HAVE_SYS_RESOURCE_H 1
#define HAVE_GETRUSAGE 1
#define HAVE_LONG_DOUBLE 1
#define HAVE_LONG_LONG 1
#define HAVE_LONG_LONG_INT 1
#define USE_STRICT_MPI 1
#define ENABLE_STRICTMPI 1
#define THREAD_PACKAGE_NAME THREAD_PACKAGE_POSIX
#define POINTERINT_t intptr_t
#define MPI_SIZEOF_OFFSET 8
#define HAVE_MPI_WIN_CREATE 1
#endif
"""
MPIX_H = "/* No MPIX extensions: the suite runs in strict MPI mode on Weft. */\n"


def log(msg):
    print(msg, flush=True)


class Entry:
    """One line of a testlist: a program run with a process count and settings."""

    def __init__(self, directory, name, procs, args=(), env=(), time_limit=None,
                 result="TestNormal", mem=None, xfail=None):
        self.dir, self.name, self.procs = directory, name, procs
        self.args, self.env = list(args), list(env)
        self.time_limit, self.result, self.mem, self.xfail = time_limit, result, mem, xfail

    @property
    def key(self):
        return " ".join([f"{self.dir}/{self.name}", str(self.procs), *self.args, *self.env])


def parse_testlist(directory):
    d = SUITE / directory
    if directory == "basic":
        return [Entry("basic", n, p, result="TestBench") for n, p in BASIC]
    path = next((d / f for f in ("testlist", "testlist.in") if (d / f).exists()), None)
    if path is None:
        return []
    entries = []
    for line in path.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if not line or "@" in line:
            continue  # a comment, or a line for the suite's configure to fill in
        words = shlex.split(line)
        if len(words) < 2 or not words[1].isdigit():
            continue  # a subdirectory or an unusual entry
        e = Entry(directory, words[0], int(words[1]))
        for w in words[2:]:
            k, _, v = w.partition("=")
            if k == "arg":
                e.args.append(v)
            elif k == "env":
                e.env.append(v)
            elif k == "timeLimit":
                e.time_limit = int(v)
            elif k == "resultTest":
                e.result = v
            elif k == "mem":
                e.mem = float(v)
            elif k == "xfail":
                e.xfail = v
            elif k == "strict" and v.lower() == "false":
                e.result = "skip:not strict MPI (uses MPICH's extensions)"
        entries.append(e)
    return entries


def run(cmd, timeout, env=None, cwd=None):
    try:
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=timeout,
                           env=env, cwd=cwd)
        return p.returncode, p.stdout.decode(errors="replace")
    except subprocess.TimeoutExpired as e:
        return None, (e.stdout or b"").decode(errors="replace")


def prepare(args):
    """Weft's prefix and the suite's framework library: (mpicc, weft, include flags, lib)."""
    out = pathlib.Path(args.out)
    (out / "include").mkdir(parents=True, exist_ok=True)
    if args.prefix:
        prefix = pathlib.Path(args.prefix)
    else:
        if not args.no_build:
            log("== cargo build --release -p weft-cli -p weft-abi")
            subprocess.run(["cargo", "build", "--release", "--quiet", "-p", "weft-cli", "-p",
                            "weft-abi"], cwd=ROOT, check=True)
        target = pathlib.Path(os.environ.get("CARGO_TARGET_DIR", ROOT / "target"))
        prefix = out / "prefix"
        subprocess.run([str(target / "release" / "weft"), "install", "--prefix", str(prefix)],
                       check=True, stdout=subprocess.DEVNULL)
    mpicc, weft = prefix / "bin" / "mpicc", prefix / "bin" / "weft"
    (out / "include" / "mpitestconf.h").write_text(CONF_H)
    (out / "include" / "mtest_mpix.h").write_text(MPIX_H)
    # dtpools includes "../dtpoolsconf.h": found as include/dtpools/../dtpoolsconf.h.
    (out / "include" / "dtpools").mkdir(exist_ok=True)
    (out / "include" / "dtpoolsconf.h").write_text("/* dtpools needs no settings here. */\n")
    flags = ["-I", str(out / "include"), "-I", str(SUITE / "include"), "-I",
             str(SUITE / "dtpools" / "include"), "-I", str(out / "include" / "dtpools")]
    lib = out / "libmtest.a"
    sources = [SUITE / "util" / f
               for f in ("mtest.c", "mtest_common.c", "mtest_single.c", "dtypes.c")]
    sources += sorted((SUITE / "dtpools" / "src").glob("*.c"))
    objs = []
    for src in sources:
        obj = out / "framework" / (src.stem + ".o")
        obj.parent.mkdir(exist_ok=True)
        status, text = run([str(mpicc), "-O1", "-w", *flags, "-c", str(src), "-o", str(obj)], 300)
        if status != 0:
            sys.exit(f"mpich-tests: the suite's framework does not build ({src.name}):\n{text}")
        objs.append(str(obj))
    status, text = run(["ar", "rcs", str(lib), *objs], 60)
    if status != 0:
        sys.exit(f"mpich-tests: ar: {text}")
    # Most tests define `run` and take their `main` from util/run_mpitests.c.
    runner = out / "framework" / "run_mpitests.o"
    status, text = run([str(mpicc), "-O1", "-w", *flags, "-c", str(SUITE / "util" / "run_mpitests.c"),
                        "-o", str(runner)], 300)
    if status != 0:
        sys.exit(f"mpich-tests: the suite's framework does not build (run_mpitests.c):\n{text}")
    return mpicc, weft, flags, (lib, runner)


def makefile_rules(directory):
    """A directory's Makefile.am: {program: (sources, preprocessor flags)} for the programs
    that are not built from the one source of their own name."""
    path = SUITE / directory / "Makefile.am"
    text = path.read_text().replace("\\\n", " ") if path.exists() else ""
    rules = {}
    for m in re.finditer(r"^(\w+)_(SOURCES|CPPFLAGS)\s*=\s*(.*)$", text, re.M):
        prog, kind, value = m.groups()
        sources, cppflags = rules.get(prog, ([f"{prog}.c"], []))
        words = [w for w in value.split() if not w.startswith("$(")]
        if kind == "SOURCES":
            sources = [w for w in words if w.endswith(".c")] or sources
        else:
            cppflags = words
        rules[prog] = (sources, cppflags)
    return rules


def build(entry, mpicc, flags, libs, out):
    """Compiles the entry's program once; (exe, None) or (None, the compiler's complaint)."""
    exe = out / entry.dir / entry.name
    if exe.exists():
        return exe, None
    exe.parent.mkdir(parents=True, exist_ok=True)
    d = SUITE / entry.dir
    names, cppflags = makefile_rules(entry.dir).get(entry.name, ([f"{entry.name}.c"], []))
    sources = [d / n for n in names]
    if not all(s.exists() for s in sources):
        return None, f"no C source {names} (a C++ or Fortran test)"
    lib, runner = libs
    has_main = any(re.search(r"\bmain\s*\(", s.read_text(errors="replace")) for s in sources)
    extra = [] if has_main else [str(runner)]
    cmd = [str(mpicc), "-O1", "-w", *flags, "-I", str(d), *cppflags, *map(str, sources), *extra,
           str(lib), "-lm", "-o", str(exe)]
    status, text = run(cmd, 300)
    if status != 0:
        first = next((l for l in text.splitlines() if "error" in l or "undefined" in l), text[:200])
        return None, "does not build: " + first.strip()
    return exe, None


def reason_of(status, text, time_limit):
    if status is None:
        return f"timed out after {time_limit} s"
    m = re.search(r"weft: (MPI_\w+): (.*?)(?: \(MPI_ERR_\w+\))?$", text, re.M)
    if m and "not supported" in m.group(2):
        return f"{m.group(1)} is not supported yet"
    if m:
        return f"{m.group(1)}: {m.group(2)}"[:160]
    lines = [l.strip() for l in text.splitlines() if l.strip()]
    if lines:
        return f"exit {status}: {lines[0][:140]}"
    return f"exit {status}, no output"


def judge(entry, status, text):
    """Whether the entry passed, by MPICH's runtests rules."""
    lines = [l for l in text.splitlines() if l.strip()]
    no_errors = any(re.fullmatch(r"\s*No [Ee]rrors\s*", l) for l in lines)
    skipped = any(re.fullmatch(r"\s*Test Skipped\s*", l) for l in lines)
    stray = [l for l in lines if not re.fullmatch(r"\s*(No [Ee]rrors|Test Skipped)\s*", l)]
    if status is None:
        # Ended by the time limit: what a test of a fatal ending wants, a failure otherwise.
        return entry.result in ("TestStatus", "TestErrFatal")
    if entry.result == "TestBench":
        return status == 0
    if entry.result in ("TestStatus", "TestErrFatal"):
        return status != 0
    if entry.result == "TestAllowWarnings":
        stray = [l for l in stray if not l.startswith(("WARNING: ", "MPICH: "))]
    return (no_errors or skipped) and not stray and status == 0


def execute(entry, exe, weft, args):
    limit = min(entry.time_limit or args.timeout, args.max_timeout)
    cmd = [str(weft), "run", *shlex.split(args.run_args), "-n", str(entry.procs), "--timeout", str(limit)]
    for kv in entry.env:
        cmd += ["-x", kv]
    cmd += [str(exe), *entry.args]
    env = dict(os.environ)
    # Tests read MPITEST_VERBOSE by getenv (set at all means verbose), as runtests leaves it.
    env.pop("MPITEST_VERBOSE", None)
    env.pop("MPIEXEC_TIMEOUT", None)
    start = time.monotonic()
    status, text = run(cmd, limit + 30, env=env, cwd=str(exe.parent))
    if status == 124:
        status = None
    return status, text, time.monotonic() - start


def load_known(path):
    known = {}
    if path.exists():
        for line in path.read_text().splitlines():
            if line.strip() and not line.startswith("#"):
                key, _, reason = line.partition("#")
                known[" ".join(key.split())] = reason.strip()
    return known


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dirs", default=DEFAULT_DIRS, help=f"comma-separated (default {DEFAULT_DIRS})")
    ap.add_argument("--only", help="run only the tests of this name")
    ap.add_argument("--prefix", help="a `weft install` prefix to use (default: build one)")
    ap.add_argument("--no-build", action="store_true", help="do not run cargo build first")
    ap.add_argument("--out", default=str(ROOT / "target" / "mpich-tests"))
    ap.add_argument("--timeout", type=int, default=60, help="seconds a test may run (default 60)")
    ap.add_argument("--max-timeout", type=int, default=180, help="cap on a testlist's timeLimit")
    ap.add_argument("--max-procs", type=int, default=16, help="skip entries wanting more ranks")
    ap.add_argument("--max-mem", type=float, default=8.0, help="skip entries wanting more GB")
    ap.add_argument("--jobs", type=int, default=2, help="compilations at once")
    ap.add_argument("--update-known", action="store_true", help="rewrite the known-failures list")
    ap.add_argument("-v", "--verbose", action="store_true", help="print each failure's output")
    ap.add_argument("--run-args", default="", help="more `weft run` arguments (hosts, say)")
    ap.add_argument("--known", default=str(KNOWN), help=f"the known-failures list (default {KNOWN.name})")
    args = ap.parse_args()
    known_path = pathlib.Path(args.known).resolve()
    args.out = str(pathlib.Path(args.out).resolve())
    if SUITE is None:
        log("mpich-tests: MPICH's suite not found (../shared/suites/mpich-test beside the "
            "project, or set WEFT_MPICH_SUITE): skipped")
        return 0
    out = pathlib.Path(args.out)
    mpicc, weft, flags, lib = prepare(args)
    entries = []
    for d in args.dirs.split(","):
        entries += [e for e in parse_testlist(d) if not args.only or e.name == args.only]
    # Build every program once, a few at a time.
    names = {(e.dir, e.name): e for e in entries}
    for stale in names:
        (out / stale[0] / stale[1]).unlink(missing_ok=True)
    with concurrent.futures.ThreadPoolExecutor(args.jobs) as pool:
        built = dict(zip(names, pool.map(lambda e: build(e, mpicc, flags, lib, out), names.values())))
    known = load_known(known_path)
    results = {}  # dir -> [passed, failed, skipped]
    failures, unexpected, fixed = {}, [], []
    for e in entries:
        counts = results.setdefault(e.dir, [0, 0, 0])
        exe, complaint = built[(e.dir, e.name)]
        skip = None
        if e.result.startswith("skip:"):
            skip = e.result[5:]
        elif e.procs > args.max_procs:
            skip = f"{e.procs} ranks (more than --max-procs {args.max_procs})"
        elif e.mem and e.mem > args.max_mem:
            skip = f"needs {e.mem} GB"
        if skip:
            counts[2] += 1
            if args.verbose:
                log(f"  skip {e.key}: {skip}")
            continue
        if exe is None:
            ok, reason, took = False, complaint, 0.0
        else:
            status, text, took = execute(e, exe, weft, args)
            ok = judge(e, status, text)
            reason = None if ok else reason_of(status, text, e.time_limit or args.timeout)
            if not ok and args.verbose:
                log(f"--- {e.key} (exit {status}):\n{text.rstrip()}\n---")
        counts[0 if ok else 1] += 1
        if ok:
            if e.key in known:
                fixed.append(e.key)
        else:
            failures[e.key] = reason
            if e.key not in known:
                unexpected.append(e.key)
        log(f"{'ok  ' if ok else 'FAIL'} {e.key} ({took:.1f} s){'' if ok else ': ' + reason}")
    total = [0, 0, 0]
    log("")
    for d, (p, f, s) in results.items():
        total = [total[0] + p, total[1] + f, total[2] + s]
        pct = 100.0 * p / (p + f) if p + f else 100.0
        log(f"{d}: {p} passed, {f} failed ({pct:.0f}%){f', {s} skipped' if s else ''}")
    pct = 100.0 * total[0] / (total[0] + total[1]) if total[0] + total[1] else 100.0
    log(f"total: {total[0]} passed, {total[1]} failed ({pct:.0f}%), {total[2]} skipped")
    if args.update_known:
        ran = {e.key for e in entries}
        keep = {k: r for k, r in known.items() if k not in ran}
        keep.update(failures)
        header = [l for l in (known_path.read_text().splitlines() if known_path.exists() else [])
                  if l.startswith("#")]
        body = [f"{k}  # {r}" for k, r in sorted(keep.items())]
        known_path.write_text("\n".join(header + body) + "\n")
        log(f"mpich-tests: wrote {len(keep)} known failures to {known_path}")
        return 0
    for k in unexpected:
        log(f"mpich-tests: unexpected failure (not in {known_path.name}): {k}: {failures[k]}")
    for k in fixed:
        log(f"mpich-tests: now passes, remove it from {known_path.name}: {k}")
    return 1 if unexpected or fixed else 0


if __name__ == "__main__":
    sys.exit(main())
