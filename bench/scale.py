#!/usr/bin/env python3
"""Start-up time, memory and sockets per rank over TCP, at 1 to 32 local ranks.

Runs weft/examples/scale_probe.rs through `weft run` with every pair on TCP
(WEFT_TRANSPORTS=tcp), for lazy and full connection set-up, with each rank talking to its
two ring neighbours or to every rank, and prints per job: the launch-to-exit wall time, the
median and slowest rank's initialize time, the mean resident memory of a rank and the mean
number of sockets and TCP connections a rank holds at the end. Python standard library only.
"""

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def target_dir():
    out = subprocess.run(["cargo", "metadata", "--format-version", "1", "--no-deps"], cwd=REPO,
                         capture_output=True, text=True, check=True).stdout
    import json
    return Path(json.loads(out)["target_directory"])


def run_job(weft, probe, n, connect, pattern, timeout):
    cmd = [str(weft), "run", "-n", str(n), "-x", "WEFT_TRANSPORTS=tcp", "-x", f"WEFT_CONNECT={connect}",
           str(probe), pattern]
    t0 = time.time()
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    wall = time.time() - t0
    if p.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed ({p.returncode}):\n{p.stderr[-2000:]}")
    rows = [line.split() for line in p.stdout.splitlines() if line.startswith("SCALE ")]
    if len(rows) != n:
        raise RuntimeError(f"expected {n} SCALE lines, got {len(rows)}")
    init = [float(r[3]) for r in rows]
    rss = [int(r[4]) for r in rows]
    socks = [int(r[5]) for r in rows]
    conns = [int(r[6]) for r in rows]
    return {"wall_ms": wall * 1e3, "init_med": statistics.median(init), "init_max": max(init),
            "rss_mib": statistics.mean(rss) / 1024, "sockets": statistics.mean(socks),
            "conns": statistics.mean(conns)}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--ranks", default="1,2,4,8,16,32")
    ap.add_argument("--repeat", type=int, default=3, help="runs per cell; the median is shown")
    ap.add_argument("--markdown", action="store_true")
    ap.add_argument("--no-build", action="store_true")
    opts = ap.parse_args()
    if not opts.no_build:
        subprocess.run(["cargo", "build", "--release", "-q", "-p", "weft-cli", "-p", "weft", "--example",
                        "scale_probe", "--bin", "weft"], cwd=REPO, check=True)
    tdir = target_dir() / "release"
    weft, probe = tdir / "weft", tdir / "examples" / "scale_probe"
    ranks = [int(x) for x in opts.ranks.split(",")]
    header = ["ranks", "connect", "peers", "job wall ms", "init ms (median / slowest)", "RSS MiB per rank",
              "sockets per rank", "TCP connections per rank"]
    rows = []
    for n in ranks:
        for connect in ("lazy", "full"):
            for pattern in ("ring", "all"):
                runs = [run_job(weft, probe, n, connect, pattern, 300) for _ in range(opts.repeat)]
                med = {k: statistics.median(r[k] for r in runs) for k in runs[0]}
                rows.append([str(n), connect, pattern, f"{med['wall_ms']:.0f}",
                             f"{med['init_med']:.1f} / {med['init_max']:.1f}", f"{med['rss_mib']:.1f}",
                             f"{med['sockets']:.1f}", f"{med['conns']:.1f}"])
                print(" ".join(rows[-1]), file=sys.stderr)
    print(f"{time.strftime('%Y-%m-%d %H:%M')}, {os.cpu_count()} CPUs, medians of {opts.repeat} runs")
    if opts.markdown:
        print("| " + " | ".join(header) + " |")
        print("|" + " --- |" * len(header))
        for r in rows:
            print("| " + " | ".join(r) + " |")
    else:
        widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(header)]
        print("  ".join(h.ljust(w) for h, w in zip(header, widths)))
        for r in rows:
            print("  ".join(c.ljust(w) for c, w in zip(r, widths)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
