"""Load test of hosted mode (a benchmark, not a test): N concurrent runs of the mnist_step
example and M training jobs through one Runner, as a class would hit the hosted app.

    TAPEVIZ_MODE=hosted python bench/hosted_load.py [--runs 30] [--trainings 5] [--link]

    TAPEVIZ_MODE=hosted python bench/hosted_load.py --sleepers 4 [--fifths 3] [--no-yield]

--sleepers N: N tabs whose programs forge "stopped" and sleep (they end only at the server's
fixed deadline), then a fifth student's small program, --fifths times one after another;
prints each small program's wait (submitted -> recording back) at p50 / max beside the
sleepers' end, and with --no-yield the same with TAPEVIZ_SLEEPERS=0 (slots held by count).

--link: the runs are pages opening one example's link at once, which share one run the way
the page sends them (tapeviz/state/link_runs.py); without it, 30 different programs.

    python bench/hosted_load.py --browsers 30

--browsers N: N real Chromium pages (each its own browser context, so its own cookie) against
one hosted app (`streamlit run app.py`, TAPEVIZ_MODE=hosted, the sandbox as the machine
allows), each opening at once a share link (`?code=`) to a different small program. Prints
page open -> graph drawn as each browser measured it (performance.now(), read when the graph
and the page's "Run → drawn in" line are both in the DOM) beside that line's own figure, at
p50 / p95, and the machine's load average before and after: other work on it shows there.

The clock starts once the pool's warm workers are ready. Every job must complete (queued
first if need be): none may fail or be lost. Prints the latency of the runs (submitted -> recording back, queueing included) at p50 / p95, the
training jobs' latencies, and the peak memory of the worker processes (sum of their RSS,
sampled from /proc every 0.2 s; no psutil needed).
"""
from __future__ import annotations

import argparse
import asyncio
import os
import re
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from tapeviz import examples  # noqa: E402
from tapeviz.state.link_runs import LinkRuns  # noqa: E402
from tapeviz.server import jobs, runner  # noqa: E402

import browser_util  # noqa: E402  (the browser tests' server and chromium)
from hosted_util import FORGES_STOPPED, SMALL  # noqa: E402  (the sleeping tabs' program)

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


# A small program per page, each a different text (so no page shares another's run).
BROWSER_PROGRAM = """import tensorflow as tf
w = tf.Variable({i}.0)
x = tf.constant([1.0, 2.0, 3.0])
with tf.GradientTape() as tape:
    loss = tf.reduce_sum((w * x - {i}) ** 2)
print("student {i}", float(loss), float(tape.gradient(loss, w)))
"""
PLOT = ".js-plotly-plot .scatterlayer, .js-plotly-plot canvas"
# Over: the page's own timing line is in the DOM and the script run is over; drawn if the
# graph is there too (a failed run has the line and no graph).
OVER = """() => /Run → (?:drawn|painted) in|Painted [0-9.]+ s after/.test(document.body.innerText)
    && !document.querySelector('[data-testid="stStatusWidget"]')"""
# When each page first showed the app, its run's "Run → drawn in" line, and the graph
# (performance.now(), ms from navigation): where a browser's wait goes. textContent, not
# innerText, so that watching forces no layout.
MARKS = """window.__marks = {};
new MutationObserver(() => {
  const t = performance.now(), m = window.__marks;
  const text = document.body ? document.body.textContent : '';
  if (!m.app && text.includes('Tape debugger')) m.app = t;
  if (!m.line && /Run → (?:drawn|painted) in|Painted [0-9.]+ s after/.test(text)) m.line = t;
  if (!m.graph && document.querySelector(PLOT)) m.graph = t;
}).observe(document, {subtree: true, childList: true, characterData: true});
""".replace("PLOT", repr(PLOT))
# The page's own figure: the server's Run -> drawn, or the browser's paint time once it
# reported it (from the page's opening, on a page's first run)
PAGE_FIGURE = re.compile(r"(?:Run → (?:drawn|painted) in|Painted) ([0-9.]+) s[^\n]*")


async def _open_all(url: str, n: int, share) -> list:
    """(browser seconds, the page's own seconds, error, {mark: seconds}) per page, all
    opened at once."""
    from playwright.async_api import async_playwright
    async with async_playwright() as p:
        chromium = await p.chromium.launch(executable_path=browser_util.CHROMIUM,
                                           args=browser_util.ARGS)
        try:
            pages = []
            for _ in range(n):          # one context each: its own cookie, its own client
                context = await chromium.new_context(viewport=browser_util.VIEWPORT)
                await context.add_init_script(MARKS)
                pages.append(await context.new_page())

            async def one(i, page):
                link = share.link(url, code=BROWSER_PROGRAM.format(i=i))
                try:
                    await page.goto(link, timeout=600_000)
                    await page.wait_for_function(OVER, timeout=600_000, polling=200)
                    own = PAGE_FIGURE.search(await page.inner_text("body"))
                    try:                  # plotly draws the figure after the script run
                        await page.wait_for_selector(PLOT, state="attached", timeout=600_000)
                    except Exception:  # noqa: BLE001 - no graph: the run failed
                        return None, None, f"no graph: {own.group(0) if own else ''}", {}
                    # performance.now() counts from this page's navigation start.
                    seen = await page.evaluate("() => performance.now()") / 1000
                    marks = {k: v / 1000 for k, v in
                             (await page.evaluate("() => window.__marks")).items()}
                    why = None
                    try:              # the printed output's code block may draw after the graph
                        await page.wait_for_function(
                            "n => document.body.textContent.includes('student ' + n + ' ')", arg=i,
                            timeout=60_000, polling=500)
                    except Exception:  # noqa: BLE001 - say whose output it shows instead
                        text = await page.text_content("body")
                        whose = sorted(set(re.findall(r"student (\d+) ", text)))
                        why = f"not its own output (student {i}; shows {whose or 'none'})"
                    marks["said"] = own.group(0) if own else ""
                    return seen, float(own.group(1)) if own else None, why, marks
                except Exception as exc:  # noqa: BLE001 - counted as a failed page
                    return None, None, f"{type(exc).__name__}: {str(exc)[:200]}", {}
            return await asyncio.gather(*(one(i, page) for i, page in enumerate(pages)))
        finally:
            await chromium.close()


def browsers(n: int) -> int:
    """The --browsers mode: n pages against one hosted app."""
    from tapeviz.state import share
    env = {"TAPEVIZ_MODE": "hosted", "TF_CPP_MIN_LOG_LEVEL": "3"}
    with browser_util.streamlit_server(env=env) as url:
        before = os.getloadavg()
        # One page first, not counted: the server a class meets has been up for a while.
        warm = asyncio.run(_open_all(url, 1, share))[0]
        print(f"hosted app up (TAPEVIZ_MODE=hosted, {os.cpu_count()} cpus); a first page "
              f"drawn in {warm[0] or float('nan'):.1f} s (not counted){' ' + warm[2] if warm[2] else ''}",
              flush=True)
        started = time.monotonic()
        results = asyncio.run(_open_all(url, n, share))
        wall = time.monotonic() - started
        after = os.getloadavg()
    seen = [r[0] for r in results if r[0] is not None and r[2] is None]
    own = [r[1] for r in results if r[1] is not None and r[2] is None]
    failed = [r[2] for r in results if r[2] is not None]
    print(f"{n} pages opening a ?code= link each, at once: {len(seen)} drawn, "
          f"{len(failed)} failed; all in {wall:.1f} s")
    print(f"  in the browsers (page open -> graph drawn): p50 {percentile(seen, .5):.1f} s, "
          f"p95 {percentile(seen, .95):.1f} s, max {max(seen, default=float('nan')):.1f} s")
    print(f"  the pages' own 'Run → drawn in':            p50 {percentile(own, .5):.1f} s, "
          f"p95 {percentile(own, .95):.1f} s, max {max(own, default=float('nan')):.1f} s")
    marks = {k: [r[3][k] for r in results if r[2] is None and k in r[3]]
             for k in ("app", "line", "graph")}
    print(f"  in the browsers, p50 from page open: the app shown {percentile(marks['app'], .5):.1f}"
          f" s, its run's line {percentile(marks['line'], .5):.1f} s, the graph "
          f"{percentile(marks['graph'], .5):.1f} s")
    print(f"  load average (1, 5, 15 min) before {before[0]:.1f} {before[1]:.1f} "
          f"{before[2]:.1f}, after {after[0]:.1f} {after[1]:.1f} {after[2]:.1f}")
    slowest = sorted((r for r in results if r[2] is None and r[1] is not None), key=lambda r: -r[1])
    for r in slowest[:3]:           # where the slowest pages' own time went, in their words
        print("  slowest page said:", r[3].get("said", ""))
    for why in failed[:5]:
        print("  failed page:", why)
    return 1 if failed else 0


def sleeping_tabs(n: int, fifths: int, env: dict) -> list:
    """The --sleepers case on one fresh Runner: the small programs' waits in seconds."""
    config = runner.Config.from_env({**os.environ, "TAPEVIZ_MODE": "hosted", **env})
    pool = runner.Runner(config)
    try:
        pool.warmed()
        sleepers = [pool.submit(runner.Record(FORGES_STOPPED), owner=f"tab-{i}",
                                client=f"browser-{i}") for i in range(n)]
        started = time.monotonic()
        waits = []
        for k in range(fifths):
            t0 = time.monotonic()
            rec = pool.record(SMALL, owner=f"student-{k}", client=f"student-browser-{k}")
            waits.append(time.monotonic() - t0)
            ok = rec.get("error") is None and "285.0" in rec.get("stdout", "")
            print(f"  small program {k + 1}: back in {waits[-1]:.1f} s"
                  f"{'' if ok else ' FAILED: ' + str(rec.get('error'))}; sleepers still running: "
                  f"{sum(not j.done for j in sleepers)} of {n}", flush=True)
        for job in sleepers:
            job.wait()
        print(f"  the sleepers ended {time.monotonic() - started:.1f} s after they were sent "
              f"({', '.join(sorted({str((j.result or {}).get('error', {}).get('type')) for j in sleepers}))})")
        return waits
    finally:
        pool.close()


def sleepers_main(n: int, fifths: int, no_yield: bool) -> int:
    print(f"{n} sleeping tabs, then {fifths} small programs one after another; "
          f"load average {os.getloadavg()[0]:.1f}, {os.cpu_count()} cpus", flush=True)
    cases = [("sleeping programs give their slots way", {})]
    if no_yield:
        cases.append(("slots held by count (TAPEVIZ_SLEEPERS=0)", {"TAPEVIZ_SLEEPERS": "0"}))
    results = {}
    for name, env in cases:
        print(name + ":", flush=True)
        results[name] = sleeping_tabs(n, fifths, env)
    for name, waits in results.items():
        print(f"{name}: a small program's wait p50 {percentile(waits, .5):.1f} s, "
              f"max {max(waits):.1f} s")
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("--trainings", type=int, default=5)
    parser.add_argument("--limit", type=int, default=500, help="digits per training job")
    parser.add_argument("--link", action="store_true",
                        help="the runs open one example's link, sharing its run")
    parser.add_argument("--browsers", type=int, default=0,
                        help="N Chromium pages opening a ?code= link each against the app")
    parser.add_argument("--sleepers", type=int, default=0,
                        help="N sleeping tabs beside a fifth student's small program")
    parser.add_argument("--fifths", type=int, default=3)
    parser.add_argument("--no-yield", action="store_true",
                        help="with --sleepers: also run with TAPEVIZ_SLEEPERS=0")
    args = parser.parse_args()
    if args.sleepers:
        return sleepers_main(args.sleepers, args.fifths, args.no_yield)
    if args.browsers:
        return browsers(args.browsers)

    os.environ.setdefault("TAPEVIZ_MODE", "hosted")
    config = runner.Config.from_env()
    source = examples.load("mnist_step").source
    sampler = Sampler()
    sampler.start()
    up = time.monotonic()
    pool = runner.Runner(config)
    # A class meets a server that has been up a while: the clock starts once its warm
    # workers are ready (the zygote's TensorFlow import is not a run's wait).
    warmed = pool.warmed()
    started = time.monotonic()
    print(f"mode={config.mode} sandbox={'bwrap' if pool.sandboxed else 'none'} "
          f"workers={config.workers} warm={config.warm} training={config.training} "
          f"cpus={os.cpu_count()}" + (" runs: one link, shared" if args.link else "")
          + f"; ready in {started - up:.1f} s (not counted){'' if warmed else ', not warmed'}",
          flush=True)
    for warning in pool.warnings:
        print("warning:", warning)

    run_latency, run_results, train_latency, train_results = {}, {}, {}, {}
    max_place = [0]

    links = LinkRuns(config.link_run_s) if args.link else None

    def submit(source, i):
        return pool.submit(runner.Record(source, "mnist_step.py"), owner=f"student-{i}")

    def one_run(i):
        """Follow the run's events as the page does (state/run_job.py), its deepest place kept."""
        t0 = time.monotonic()
        events = (links.events(source, submit=lambda s: submit(s, i)) if links
                  else submit(source, i).stream())
        for event in events:
            if isinstance(event, jobs.Phase) and event.name == "queued" and event.place:
                max_place[0] = max(max_place[0], event.place)
            elif isinstance(event, jobs.Recorded):
                run_results[i] = event.data
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
