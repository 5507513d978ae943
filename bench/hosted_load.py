"""Load test of hosted mode (a benchmark, not a test): N concurrent runs of the mnist_step
example and M training jobs through one Runner, as a class would hit the hosted app.

    TAPEVIZ_MODE=hosted python bench/hosted_load.py [--runs 30] [--trainings 5] [--link]

--link: the runs are pages opening one example's link at once, which share one run the way
the page sends them (tapeviz/page/link_runs.py); without it, 30 different programs.

Every job must complete (queued first if need be): none may fail or be lost. Prints the
latency of the runs (submitted -> recording back, queueing included) at p50 / p95, the
training jobs' latencies, and the peak memory of the worker processes (sum of their RSS,
sampled from /proc every 0.2 s; no psutil needed).
"""
from __future__ import annotations

import argparse
import os
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tapeviz import examples  # noqa: E402
from tapeviz.page.link_runs import LinkRuns  # noqa: E402
from tapeviz.server import runner  # noqa: E402

PAGE = os.sysconf("SC_PAGE_SIZE")


def descendants(root: int) -> list:
    children: dict = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    ppid = int(f.read().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(entry))
    out, todo = [], [root]
    while todo:
        for child in children.get(todo.pop(), []):
            out.append(child)
            todo.append(child)
    return out


def rss(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/statm") as f:
            return int(f.read().split()[1]) * PAGE
    except (OSError, IndexError, ValueError):
        return 0


class Sampler(threading.Thread):
    """Peak of the summed RSS of every process below this one (workers and their bwraps)."""

    def __init__(self):
        super().__init__(daemon=True)
        self.peak_bytes = self.peak_processes = 0
        self.peak_server = 0
        self.stop = threading.Event()

    def run(self):
        me = os.getpid()
        while not self.stop.is_set():
            pids = descendants(me)
            self.peak_bytes = max(self.peak_bytes, sum(rss(p) for p in pids))
            self.peak_processes = max(self.peak_processes, len(pids))
            self.peak_server = max(self.peak_server, rss(me))
            time.sleep(0.2)


def percentile(values, q):
    values = sorted(values)
    if not values:
        return float("nan")
    k = (len(values) - 1) * q
    lo, hi = int(k), min(int(k) + 1, len(values) - 1)
    return values[lo] + (values[hi] - values[lo]) * (k - lo)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("--trainings", type=int, default=5)
    parser.add_argument("--limit", type=int, default=500, help="digits per training job")
    parser.add_argument("--link", action="store_true",
                        help="the runs open one example's link, sharing its run")
    args = parser.parse_args()

    os.environ.setdefault("TAPEVIZ_MODE", "hosted")
    config = runner.Config.from_env()
    source = examples.load("mnist_step").source
    sampler = Sampler()
    sampler.start()
    started = time.monotonic()
    pool = runner.Runner(config)
    print(f"mode={config.mode} sandbox={'bwrap' if pool.sandboxed else 'none'} "
          f"workers={config.workers} warm={config.warm} training={config.training} "
          f"cpus={os.cpu_count()}" + (" runs: one link, shared" if args.link else ""),
          flush=True)
    for warning in pool.warnings:
        print("warning:", warning)

    run_latency, run_results, train_latency, train_results = {}, {}, {}, {}
    max_place = [0]

    def on_wait(place):
        max_place[0] = max(max_place[0], place)

    links = LinkRuns(config.link_run_s) if args.link else None

    def one_run(i):
        t0 = time.monotonic()

        def record(source, on_wait=None, on_phase=None):
            return pool.record(source, "mnist_step.py", on_wait=on_wait, on_phase=on_phase,
                               owner=f"student-{i}")
        run_results[i] = (links.run(source, run=record, on_wait=on_wait) if links
                          else record(source, on_wait=on_wait))
        run_latency[i] = time.monotonic() - t0

    def one_training(i):
        t0 = time.monotonic()
        job = pool.submit(runner.Train({"model": "guide", "epochs": 1, "limit": args.limit}),
                          owner=f"trainer-{i}")
        job.wait()
        train_latency[i] = time.monotonic() - t0
        train_results[i] = job

    threads = [threading.Thread(target=one_training, args=(i,)) for i in range(args.trainings)]
    threads += [threading.Thread(target=one_run, args=(i,)) for i in range(args.runs)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.monotonic() - started
    pool.close()
    sampler.stop.set()
    sampler.join()

    failed = [i for i in range(args.runs)
              if i not in run_results or run_results[i]["error"] is not None
              or "loss =" not in run_results[i]["stdout"]]
    bad_training = [i for i in range(args.trainings)
                    if i not in train_results or train_results[i].error is not None]
    runs = list(run_latency.values())
    trains = list(train_latency.values())
    print(f"runs: {len(run_results)}/{args.runs} back, {len(failed)} failed; "
          f"latency p50 {percentile(runs, .5):.1f} s, p95 {percentile(runs, .95):.1f} s, "
          f"max {max(runs, default=0):.1f} s")
    print(f"training jobs: {len(train_results)}/{args.trainings} back, {len(bad_training)} failed;"
          f" latency p50 {percentile(trains, .5):.1f} s, max {max(trains, default=0):.1f} s")
    print(f"deepest queue place seen: {max_place[0]}; all done in {wall:.1f} s")
    print(f"peak worker memory (sum of RSS): {sampler.peak_bytes / 2**30:.2f} GiB over at most "
          f"{sampler.peak_processes} processes; server process peak RSS "
          f"{sampler.peak_server / 2**20:.0f} MiB")
    for i in failed[:5]:
        print("failed run", i, run_results.get(i, {}).get("error"))
    for i in bad_training[:5]:
        print("failed training", i, getattr(train_results.get(i), "error", "lost"))
    return 1 if failed or bad_training else 0


if __name__ == "__main__":
    sys.exit(main())
