"""Benchmark: Run -> graph drawn, as a user waits for it, in a real browser.

Starts `streamlit run app.py` (local mode) and Debian's chromium (Playwright), then for a
few examples prints, in seconds:
  cold   the first run after the server started (`?example=NAME` opened in a new tab:
         the zygote may still be importing TensorFlow, the page's modules load);
  warm   Run pressed again and again, back to back (median, min-max over the presses),
         split as the browser sees it: click -> the program runs (the status says
         "Running your program") -> the run is drawn and timed (the page's "Run → drawn
         in" line) -> the script run is over (Streamlit idle) -> the graph is on screen
         (plotly's SVG in the next frame).
Beside them, the server-side split of the same run (runner round trip, graph + layout,
plotly figure, the figure's JSON size), measured in this process without a browser.

    python bench/bench_page.py [--presses 6] [--examples higher_order,mnist_step]
"""
import argparse
import os
import signal
import socket
import statistics
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

CHROMIUM = "/usr/bin/chromium"
ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking",
        "--disable-component-update", "--disable-sync", "--no-first-run"]

# Installed before each click: when the page shows each stage, in performance.now() ms.
# A fast run may never show "Running your program" (Streamlit draws a status only after a
# short delay), so Streamlit's own running widget, or the last run's "Run → drawn in" line
# being taken down or replaced, also counts as the run having started; waiting for the
# status text alone hung the bench once. Finished: a fresh "Run → drawn in" line.
WATCH = """() => {
  const drawnLine = () => (document.body.innerText.match(/Run → drawn in[^\\n]*/) || [''])[0];
  window.__t = {click: performance.now(), before: drawnLine()};
  const seen = () => {
    const text = document.body.innerText;
    const t = performance.now();
    const line = drawnLine();
    if (!line) window.__t.gone = true;            // the last run's line was taken down
    const fresh = line && (line !== window.__t.before || window.__t.gone);
    if (!window.__t.running && (text.includes('Running your program') || window.__t.gone
        || document.querySelector('[data-testid="stStatusWidget"]') || fresh))
      window.__t.running = t;
    if (window.__t.running && !window.__t.finished && fresh) window.__t.finished = t;
  };
  if (window.__obs) window.__obs.disconnect();
  window.__obs = new MutationObserver(seen);
  window.__obs.observe(document.body, {subtree: true, childList: true, characterData: true});
}"""

PLOT = ".js-plotly-plot .scatterlayer, .js-plotly-plot canvas"
# True once the run is over and its graph is on screen (polled every animation frame).
DRAWN = """() => {
  const t = window.__t;
  if (!t || !t.finished) return false;
  if (document.querySelector('[data-testid="stStatusWidget"]')) return false;  // still running
  const svg = document.querySelector(PLOT);
  if (!svg) return false;
  if (!t.idle) t.idle = performance.now();
  t.drawn = performance.now();
  return true;
}""".replace("PLOT", repr(PLOT))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_server() -> tuple:
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "streamlit", "run", "app.py", "--server.headless", "true",
         "--server.port", str(port), "--browser.gatherUsageStats", "false"],
        cwd=ROOT, stdout=subprocess.DEVNULL, stderr=open("/tmp/st_err.txt", "w") if os.environ.get("BENCH_LOG") else subprocess.DEVNULL,
        env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"), start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 90
    while True:
        try:
            urllib.request.urlopen(url + "/_stcore/health", timeout=2)
            return proc, url
        except OSError:
            if proc.poll() is not None or time.monotonic() > deadline:
                raise SystemExit("streamlit did not start")
            time.sleep(0.2)


def stages(page) -> dict:
    t = page.evaluate("() => window.__t")
    return {k: (t[k] - t["click"]) / 1000 for k in ("running", "finished", "idle", "drawn")
            if k in t}


def open_example(page, url: str, name: str) -> float:
    """Open ?example=NAME (which runs it) and return seconds until the graph is drawn."""
    t0 = time.perf_counter()
    page.goto(f"{url}/?example={name}")
    page.wait_for_selector(PLOT, timeout=300_000, state="attached")
    page.wait_for_function("() => !document.querySelector('[data-testid=\"stStatusWidget\"]')",
                           timeout=300_000, polling="raf")
    return time.perf_counter() - t0


def press_run(page) -> dict:
    page.evaluate(WATCH)
    # The Run button lives in the editor's own frame (streamlit-code-editor's Ace).
    page.frame_locator("iframe[title*='code_editor']").get_by_text("Run").click()
    page.wait_for_function(DRAWN, timeout=300_000, polling="raf")
    return stages(page)


def server_side(name: str, repeats: int = 3) -> dict:
    """The same run without a browser: runner round trip, graph + layout, figure, JSON."""
    from tapeviz import examples
    from tapeviz.draw import figures, graph, layout
    from tapeviz.page import view
    from tapeviz.recording import Recording
    from tapeviz.server import runner
    pool = runner.Runner(runner.Config(warm=1))
    try:
        if pool.zygote is not None:
            pool.zygote.ready.wait(300)
        source = examples.load(name).source
        rows = []
        for _ in range(repeats + 1):
            t0 = time.perf_counter()
            rec = Recording.from_dict(pool.record(source))
            t1 = time.perf_counter()
            G = graph.build(rec, tape=view.default_tape(rec), group=graph.opens_grouped(rec))
            pos = layout.layered(G)
            t2 = time.perf_counter()
            fig = figures.op_graph(G, pos)
            t3 = time.perf_counter()
            rows.append((t1 - t0, t2 - t1, t3 - t2, len(fig.to_json())))
        rows = rows[1:]                  # the first one fills the pool
        return {"worker": statistics.median(r[0] for r in rows),
                "graph": statistics.median(r[1] for r in rows),
                "figure": statistics.median(r[2] for r in rows), "json": rows[0][3]}
    finally:
        pool.close()


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--presses", type=int, default=6)
    parser.add_argument("--examples", default="higher_order,mnist_step")
    args = parser.parse_args()
    from playwright.sync_api import sync_playwright
    names = args.examples.split(",")
    proc, url = start_server()
    results = {}
    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
            try:
                for i, name in enumerate(names):
                    page = browser.new_page(viewport={"width": 1600, "height": 1000})
                    cold = open_example(page, url, name)
                    presses = [press_run(page) for _ in range(args.presses)]
                    results[name] = (cold, presses, i == 0)
                    page.close()
            finally:
                browser.close()
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)

    print(f"Run -> graph drawn in chromium, seconds ({args.presses} presses back to back; "
          f"median [min-max]):")
    for name, (cold, presses, first) in results.items():
        drawn = [p["drawn"] for p in presses]
        split = {k: statistics.median(p.get(k, float("nan")) for p in presses)
                 for k in ("running", "finished", "idle")}
        print(f"  {name:13s} warm {statistics.median(drawn):5.2f} [{min(drawn):.2f}-"
              f"{max(drawn):.2f}]   cold {cold:5.2f}"
              + (" (first page of a fresh server)" if first else " (new tab)"))
        print(f"  {'':13s} click -> running {split['running']:.2f}, -> drawn and timed "
              f"{split['finished']:.2f}, -> script over {split['idle']:.2f}, -> drawn "
              f"{statistics.median(drawn):.2f}")
        print(f"  {'':13s} each press: " + " ".join(f"{d:.2f}" for d in drawn))
    print("Server side, no browser (median of 3, warm):")
    for name in names:
        s = server_side(name)
        print(f"  {name:13s} worker round trip {s['worker']:.2f} s, graph + layout "
              f"{s['graph']:.2f} s, figure {s['figure']:.2f} s, figure JSON {s['json'] / 1024:.0f} KiB")


if __name__ == "__main__":
    main()
