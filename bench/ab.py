#!/usr/bin/env python3
"""Interleaved A/B runs of one benchmark program: Weft builds or settings against each other
and against the peers, each run tagged with the CPUs' state (floor.c's two-lines round trip
before and after it), the medians printed per state.

compare.py answers "how does Weft stand against the peers"; this answers "did this change
help", quickly and on a machine whose host moves its two vCPUs between one core ("T",
together) and two ("A", apart) every few seconds: only runs that stayed in one state are
comparable, so the table groups them by state (X: the state changed during the run).

    python3 bench/ab.py -n 2 --ops allreduce,bcast --sizes 8,64 --rounds 6 \\
        base=weft@/tmp/coll.base new=weft tuned=weft:WEFT_COLL_SHM_SLOT=256k ompi=openmpi

A variant is LABEL=IMPL[@PROGRAM][:VAR=VALUE,...]: IMPL is weft or a peer of compare.py
(mpich, openmpi, mpich5, openmpi5; their programs are compare.py's builds in
bench/out/build); PROGRAM a Weft build of the benchmark other than target/release/PROG;
VAR=VALUE settings for every rank. The programs read BENCH_OPS and BENCH_SIZES (coll) or
BENCH_SIZES (latency). Run compare.py once first (it builds the peers' programs and the floor).
"""
import argparse
import collections
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import compare  # noqa: E402  (the launch commands, the builds' places, the result parser)


def parse_variant(text):
    label, _, rest = text.partition("=")
    impl, _, settings = rest.partition(":")
    impl, _, program = impl.partition("@")
    if not label or impl not in ("weft", *compare.PEER_TOOLS):
        sys.exit(f"ab.py: a variant is LABEL=IMPL[@PROGRAM][:VAR=VALUE,...], not {text!r}")
    env = dict(kv.split("=", 1) for kv in settings.split(",") if kv)
    return label, impl, program or None, env


def floor(floor_exe):
    status, out, _ = compare.run_cmd([str(floor_exe)], timeout=30)
    trips = [v for (n, _, v, _) in compare.parse_results(out) if n == "floor_two_lines"]
    return trips[0] if trips and not status else None


def state_of(before, after, threshold):
    if before is None or after is None:
        return "X"
    if before <= threshold and after <= threshold:
        return "T"
    if before > threshold and after > threshold:
        return "A"
    return "X"


def command(impl, program, env, args):
    prog = program or (
        compare.cargo_target_dir() / "release" / args.prog
        if impl == "weft"
        else compare.BUILD_DIR / f"{args.prog}.{impl}"
    )
    cmd = compare.launch_cmd(impl, args.n, prog, args.launcher, [], bind=args.bind)
    if impl.startswith("openmpi"):
        # weft run and Hydra hand the ranks their environment; Open MPI's mpirun only what -x
        # names.
        cmd[1:1] = [x for k in ("BENCH_OPS", "BENCH_SIZES", *env) for x in ("-x", k)]
    return cmd


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("variants", nargs="+", help="LABEL=IMPL[@PROGRAM][:VAR=VALUE,...]")
    ap.add_argument("-n", type=int, default=2, help="ranks (default 2)")
    ap.add_argument("--prog", default="coll", help="benchmark program: coll (default), latency")
    ap.add_argument("--ops", default="", help="BENCH_OPS, for coll (barrier always runs)")
    ap.add_argument("--sizes", default="", help="BENCH_SIZES: byte counts")
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--bind", choices=("default", "core", "none"), default="core",
                    help="as compare.py's --bind (default core; Open MPI refuses core when "
                    "ranks outnumber CPUs: use default there)")
    ap.add_argument("--want", choices=("T", "A"),
                    help="before each run wait (up to 120 s) for the CPUs to be in this state")
    ap.add_argument("--state-threshold", type=float, default=0.12)
    args = ap.parse_args()
    args.launcher = compare.cargo_target_dir() / "release" / "weft"
    variants = [parse_variant(v) for v in args.variants]
    floor_exe = compare.BUILD_DIR / "floor"
    if not floor_exe.exists():
        sys.exit("ab.py: no bench/out/build/floor: run compare.py once first")
    data = collections.defaultdict(list)  # (label, state, result) -> values
    for r in range(args.rounds):
        # Alternate the order, so neither side always runs first.
        for label, impl, program, env in variants if r % 2 == 0 else variants[::-1]:
            before = floor(floor_exe)
            for _ in range(120 if args.want else 0):
                if before is not None and (before > args.state_threshold) == (args.want == "A"):
                    break
                time.sleep(1)
                before = floor(floor_exe)
            run_env = dict(os.environ, BENCH_OPS=args.ops, BENCH_SIZES=args.sizes, **env)
            for k in ("BENCH_OPS", "BENCH_SIZES"):
                if not run_env[k]:
                    del run_env[k]
            status, out, err = compare.run_cmd(command(impl, program, env, args), timeout=600,
                                               env=run_env)
            state = state_of(before, floor(floor_exe), args.state_threshold)
            if status:
                print(f"ab.py: {label} exited {status}:\n{compare.tail(err)}", file=sys.stderr)
            for name, size, value, _unit in compare.parse_results(out):
                data[(label, state, f"{name} {size}")].append(value)
        print(f"round {r + 1} of {args.rounds} done", file=sys.stderr)
    labels = [v[0] for v in variants]
    results = sorted({k[2] for k in data}, key=lambda x: (x.split()[0], float(x.split()[1])))
    for state in "TAX":
        if not any(k[1] == state for k in data):
            continue
        print(f"\nCPUs {dict(T='together', A='apart', X='changed during the run')[state]}: "
              "median (min) [runs]")
        print(f"{'':22}" + "".join(f"{label:>24}" for label in labels))
        for res in results:
            cells = []
            for label in labels:
                v = data.get((label, state, res))
                cells.append(f"{statistics.median(v):.3f} ({min(v):.3f}) [{len(v)}]" if v else "-")
            print(f"{res:22}" + "".join(f"{c:>24}" for c in cells))


if __name__ == "__main__":
    main()
