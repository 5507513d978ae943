"""The capacity model of docs/hosting.md, from a bench run here: CPU seconds per hosted run,
then replicas of deploy/base/deployment.yaml per class size.

    python deploy/capacity.py [--runs 10 30] [--burst-s 15] [--every-min 2]

Runs `bench/hosted_load.py --trainings 0` (hosted mode, bwrap on) twice, with two numbers
of runs, and counts the CPU time of the bench and every process below it: /proc sampled
every 0.1 s, each process's last user + system time (a process's last 0.1 s can be
missed; getrusage cannot be used, since a worker's sandbox is killed before it reaps the
worker). The difference between the two, per extra run, is the CPU one run costs, with
the server's start and its warm worker taken out. The model is then:

- a burst (the whole class presses Run at once): the replicas' cores must do N runs within
  the target: replicas >= N x cpu_per_run / (cores per replica x target seconds);
- steady work (each student runs once every few minutes): the runs' CPU must stay under
  the HPA's target utilisation: replicas >= rate x cpu_per_run / (cores x utilisation).

It is checked against the bench itself: the larger bench's runs, spread over this
machine's cores, predict its wall time, printed beside the time the bench took. On a
machine other work shares, the bench takes longer than predicted.
"""
from __future__ import annotations

import argparse
import math
import os
import re
import subprocess
import sys
import threading
import time
from pathlib import Path

import yaml

from pod_check import cpu_cores   # this script's own folder is first on sys.path

ROOT = Path(__file__).resolve().parent.parent
BASE = ROOT / "deploy" / "base"


TICK = os.sysconf("SC_CLK_TCK")


def process_table() -> dict:
    """{pid: (parent pid, start time, CPU seconds so far)} of every process, from /proc."""
    table = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    fields = f.read().rsplit(")", 1)[1].split()
            except (OSError, IndexError):
                continue
            # After the name: state, ppid, ... utime (12th), stime (13th), starttime (20th).
            table[int(entry)] = (int(fields[1]), fields[19],
                                 (int(fields[11]) + int(fields[12])) / TICK)
    return table


class CpuSampler(threading.Thread):
    """The CPU seconds of a process and everything below it, each process's last reading
    kept by (pid, start time), so a reused pid is a new process."""

    def __init__(self, root: int):
        super().__init__(daemon=True)
        self.root, self.seen, self.stop = root, {}, threading.Event()

    def run(self):
        while not self.stop.is_set():
            table = process_table()
            below, todo = set(), [self.root]
            children: dict = {}
            for pid, (ppid, _, _) in table.items():
                children.setdefault(ppid, []).append(pid)
            while todo:
                pid = todo.pop()
                if pid in table and pid not in below:
                    below.add(pid)
                    todo += children.get(pid, [])
            for pid in below:
                _, start, cpu = table[pid]
                self.seen[(pid, start)] = cpu
            time.sleep(0.1)

    @property
    def cpu_s(self) -> float:
        return sum(self.seen.values())


def bench(runs: int) -> dict:
    """One hosted_load run: its CPU seconds (all processes), wall seconds, and outcome."""
    proc = subprocess.Popen([sys.executable, str(ROOT / "bench" / "hosted_load.py"),
                             "--runs", str(runs), "--trainings", "0"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=dict(os.environ, TAPEVIZ_MODE="hosted"))
    sampler = CpuSampler(proc.pid)
    sampler.start()
    out, err = proc.communicate(timeout=3600)
    sampler.stop.set()
    sampler.join()
    cpu = sampler.cpu_s
    done = subprocess.CompletedProcess(proc.args, proc.returncode, out, err)
    if done.returncode != 0 or "sandbox=bwrap" not in out:
        raise SystemExit(f"hosted_load failed or ran unsandboxed:\n{out}\n{done.stderr[-2000:]}")
    back = re.search(r"runs: (\d+)/(\d+) back, (\d+) failed; latency p50 ([\d.]+) s, "
                     r"p95 ([\d.]+) s", out)
    wall = float(re.search(r"all done in ([\d.]+) s", out).group(1))
    workers = int(re.search(r"workers=(\d+)", out).group(1))
    return {"runs": runs, "cpu_s": cpu, "wall_s": wall, "workers": workers,
            "failed": int(back.group(3)), "p50": float(back.group(4)),
            "p95": float(back.group(5))}


def manifest(name: str) -> dict:
    return yaml.safe_load((BASE / name).read_text())


def replica_shape() -> dict:
    """Cores (the pool's width), memory and the HPA's bounds, from the manifests."""
    container = manifest("deployment.yaml")["spec"]["template"]["spec"]["containers"][0]
    cores = cpu_cores(container["resources"]["requests"]["cpu"])
    hpa = manifest("hpa.yaml")["spec"]
    return {"cores": cores, "memory": container["resources"]["requests"]["memory"],
            "min": hpa["minReplicas"], "max": hpa["maxReplicas"],
            "utilisation": hpa["metrics"][0]["resource"]["target"]["averageUtilization"] / 100}


def replicas_for_burst(students: int, cpu_per_run: float, cores: float, target_s: float) -> int:
    return math.ceil(students * cpu_per_run / (cores * target_s))


def replicas_for_steady(students: int, cpu_per_run: float, cores: float, every_min: float,
                        utilisation: float) -> int:
    rate = students / (60 * every_min)                  # runs per second, the whole class
    return math.ceil(rate * cpu_per_run / (cores * utilisation))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, nargs=2, default=[10, 30],
                        help="the two bench sizes (runs each); their difference is measured")
    parser.add_argument("--burst-s", type=float, default=15.0,
                        help="a class's burst of runs should be done within this")
    parser.add_argument("--every-min", type=float, default=2.0,
                        help="in steady work a student presses Run once every this many minutes")
    parser.add_argument("--classes", type=int, nargs="+", default=[30, 100, 300, 1000])
    args = parser.parse_args()

    small, large = bench(args.runs[0]), bench(args.runs[1])
    for b in (small, large):
        print(f"hosted_load --runs {b['runs']} --trainings 0: {b['cpu_s']:.1f} CPU s, "
              f"all done in {b['wall_s']:.1f} s, p50 {b['p50']:.1f} s, p95 {b['p95']:.1f} s, "
              f"{b['failed']} failed (workers={b['workers']})")
    per_run = (large["cpu_s"] - small["cpu_s"]) / (large["runs"] - small["runs"])
    fixed = small["cpu_s"] - small["runs"] * per_run
    print(f"CPU per run: {per_run:.2f} s; server start and warm worker: {fixed:.1f} s")

    here = min(os.cpu_count() or 1, large["workers"])
    predicted = large["runs"] * per_run / here
    print(f"check: {large['runs']} runs x {per_run:.2f} s over {here} cores predicts "
          f"{predicted:.1f} s for the larger bench; it took {large['wall_s']:.1f} s "
          f"(ratio {large['wall_s'] / predicted:.2f}; load average now "
          f"{os.getloadavg()[0]:.1f} on {os.cpu_count()} cores)")

    shape = replica_shape()
    print(f"\nreplica: {shape['cores']:g} cores = {math.ceil(shape['cores'])} run workers, "
          f"{shape['memory']}; HPA {shape['min']}-{shape['max']} at "
          f"{shape['utilisation']:.0%} CPU")
    print(f"{'students':>8}  {'burst: all at once, done in ' + format(args.burst_s, 'g') + ' s':>36}"
          f"  {'steady: one run each ' + format(args.every_min, 'g') + ' min':>32}")
    for students in args.classes:
        burst = replicas_for_burst(students, per_run, shape["cores"], args.burst_s)
        steady = replicas_for_steady(students, per_run, shape["cores"], args.every_min,
                                     shape["utilisation"])
        print(f"{students:>8}  {max(burst, shape['min']):>25} replicas"
              f"  {max(steady, shape['min']):>23} replicas")
    return 0


if __name__ == "__main__":
    sys.exit(main())
