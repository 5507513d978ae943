"""What users wait for on the debugger page: Run -> graph drawn.

    python bench/page_speed.py browser [--presses 6] [--examples higher_order,mnist_step] [--load N]
        in a real browser (`streamlit run app.py`, local mode, and Debian's chromium):
        the first page of a fresh server (the zygote may still be importing TensorFlow),
        then Run pressed again and again, back to back (median [min-max]), split as the
        browser sees it: click -> the program runs -> the run is drawn and timed (the
        page's "Run → drawn in" line) -> the script run is over -> the graph on screen;
        --load N runs N busy loops beside it from the first press on (a loaded machine)
    python bench/page_speed.py profile [--example higher_order] [--top 25]
        a Chrome CPU profile of one press, by function (self and inclusive time)
    python bench/page_speed.py server [--big 1000,10000]
        the same runs without a browser (the worker's round trip, graph and layout, the
        plotly figure, its JSON), a cold worker beside a warm one, and the figures of
        recordings of a loop of many ops, as the page opens them (folded) and unfolded
"""
import argparse
import collections
import statistics
import sys
import time
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

import browser_util  # noqa: E402  (the browser tests' server and chromium)

# Installed before each click: when the page shows each stage, in performance.now() ms.
# Text alone cannot tell a run is over: a quick run draws the same "Run → drawn in 0.4 s"
# line the last press drew, and may never show "Running your program" (Streamlit shows a
# status only after a short delay); waiting for a fresh line hung the bench on the
# graph-first page. The app root's script state (`data-test-script-state`, Streamlit's own
# mark for its tests) says when the press's script run started and when the last run it
# led to ended; the "Run → drawn in" line must be on the page then (a slow run's reruns
# take it down while its status shows, so a rerun in between never counts as the end).
WATCH = """() => {
  const app = document.querySelector('[data-testid="stApp"]');
  const drawnLine = () => (document.body.innerText.match(/Run → (?:drawn|painted) in[^\\n]*/) || [''])[0];
  const state = () => app.getAttribute('data-test-script-state');
  window.__t = {click: performance.now(), before: drawnLine()};
  const seen = () => {
    const t = performance.now();
    const line = drawnLine();
    if (!line) window.__t.gone = true;            // the last run's line was taken down
    if (!window.__t.running && state() === 'running') window.__t.running = t;
    if (!window.__t.running) return;
    if (!window.__t.finished && line && (line !== window.__t.before || window.__t.gone
        || state() !== 'running'))
      window.__t.finished = t;                    // drawn and timed
    if (window.__t.finished && !window.__t.over && line && state() === 'notRunning')
      window.__t.over = t;                        // the script run is over
  };
  if (window.__obs) window.__obs.disconnect();
  window.__obs = new MutationObserver(seen);
  window.__obs.observe(document.body, {subtree: true, childList: true, characterData: true,
                                       attributes: true, attributeFilter: ['data-test-script-state']});
}"""

PLOT = ".js-plotly-plot .scatterlayer, .js-plotly-plot canvas"
# True once the run is over and its graph is on screen (polled every animation frame).
DRAWN = """() => {
  const t = window.__t;
  if (!t || !t.over) return false;
  if (document.querySelector('[data-testid="stStatusWidget"]')) return false;  // still running
  const svg = document.querySelector(PLOT);
  if (!svg) return false;
  t.drawn = performance.now();
  return true;
}""".replace("PLOT", repr(PLOT))


def stages(page) -> dict:
    t = page.evaluate("() => window.__t")
    return {k: (t[k] - t["click"]) / 1000 for k in ("running", "finished", "over", "drawn")
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



@contextmanager
def page_in_chromium():
    """A fresh local-mode server (as the browser tests start one) and chromium on it."""
    from playwright.sync_api import sync_playwright
    with browser_util.streamlit_server(env={"TF_CPP_MIN_LOG_LEVEL": "3"}) as url:
        with sync_playwright() as p:
            chromium = p.chromium.launch(executable_path=browser_util.CHROMIUM,
                                         args=browser_util.ARGS)
            try:
                yield chromium, url
            finally:
                chromium.close()


def browser(args) -> None:
    from arrival import load      # the same busy loops as the arrival bench
    results = {}
    with page_in_chromium() as (chromium, url):
        for i, name in enumerate(args.examples.split(",")):
            page = chromium.new_page(viewport={"width": 1600, "height": 1000})
            cold = open_example(page, url, name)
            with load(args.load):
                presses = [press_run(page) for _ in range(args.presses)]
            results[name] = (cold, presses, i == 0)
            page.close()
    print(f"Run -> graph drawn in chromium, seconds ({args.presses} presses back to back, "
          f"{args.load} busy loops beside them; median [min-max]):")
    for name, (cold, presses, first) in results.items():
        drawn = [p["drawn"] for p in presses]
        split = {k: statistics.median(p.get(k, float("nan")) for p in presses)
                 for k in ("running", "finished", "over")}
        print(f"  {name:13s} warm {statistics.median(drawn):5.2f} [{min(drawn):.2f}-"
              f"{max(drawn):.2f}]   cold {cold:5.2f}"
              + (" (first page of a fresh server)" if first else " (new tab)"))
        print(f"  {'':13s} click -> running {split['running']:.2f}, -> drawn and timed "
              f"{split['finished']:.2f}, -> script over {split['over']:.2f}, -> drawn "
              f"{statistics.median(drawn):.2f}")
        print(f"  {'':13s} each press: " + " ".join(f"{d:.2f}" for d in drawn))


def frame_name(node: dict) -> str:
    call = node["callFrame"]
    script = call["url"].rsplit("/", 1)[-1] or "(native)"
    return f"{call['functionName'] or '(anonymous)'}  {script[:48]}"


def by_function(profile: dict) -> tuple:
    """(self ms, inclusive ms) per function name, from a CDP Profiler profile."""
    nodes = {n["id"]: n for n in profile["nodes"]}
    parent = {child: n["id"] for n in profile["nodes"] for child in n.get("children", ())}
    own, inclusive = collections.Counter(), collections.Counter()
    # timeDeltas[i] is the gap before sample i: sample i lasted until sample i + 1
    lasted = profile["timeDeltas"][1:] + [0]
    for sample, micros in zip(profile["samples"], lasted):
        own[frame_name(nodes[sample])] += micros / 1000
        seen, at = set(), sample
        while at is not None:
            name = frame_name(nodes[at])
            if name not in seen:
                seen.add(name)
                inclusive[name] += micros / 1000
            at = parent.get(at)
    return own, inclusive



def profile(args) -> None:
    """This is how the WebGL set-up behind a few point-less Scattergl traces was found
    (`getContext` near the top)."""
    with page_in_chromium() as (chromium, url):
        page = chromium.new_page(viewport={"width": 1600, "height": 1000})
        open_example(page, url, args.example)
        press_run(page)                                   # warm: the next press is profiled
        cdp = page.context.new_cdp_session(page)
        cdp.send("Profiler.enable")
        cdp.send("Profiler.setSamplingInterval", {"interval": 200})   # microseconds
        cdp.send("Profiler.start")
        split = press_run(page)
        cpu_profile = cdp.send("Profiler.stop")["profile"]
    print(f"{args.example}: " + ", ".join(f"click -> {k} {v:.2f} s" for k, v in split.items()))
    own, inclusive = by_function(cpu_profile)
    for title, counts in (("self time", own), ("inclusive time", inclusive)):
        print(f"by {title}, ms:")
        for name, ms in counts.most_common(args.top):
            print(f"  {ms:7.1f}  {name}")



LOOP = """
import tensorflow as tf
x = tf.Variable(1.0)
with tf.GradientTape() as tape:
    y = x
    for i in range(N):
        y = y * 1.0001 + 0.0001
g = tape.gradient(y, x)
"""


def run_to_figure(pool, source: str) -> tuple:
    """One Run as the page draws it: (worker, graph + layout, figure seconds, JSON bytes)."""
    from tapeviz.draw import figures, graph, layout
    from tapeviz.draw.options import View
    from tapeviz.state import view
    from tapeviz.recording import Recording
    t0 = time.perf_counter()
    rec = Recording.from_dict(pool.record(source))
    t1 = time.perf_counter()
    G = graph.build(rec, View(tape=view.default_tape(rec), group=graph.opens_grouped(rec)))
    pos = layout.layered(G)
    t2 = time.perf_counter()
    fig = figures.op_graph(G, pos)
    t3 = time.perf_counter()
    return t1 - t0, t2 - t1, t3 - t2, len(fig.to_json())


def big_figures(pool, n: int) -> None:
    from tapeviz.draw import figures, gradient_flow, graph, layout
    from tapeviz.draw.options import View
    from tapeviz.recording import Recording
    rec = Recording.from_dict(pool.record(LOOP.replace("N", str(n // 2)), timeout=120))
    # as the page opens (loops folded), and with Fold loops off: every op a node
    for options in ({"tape": 0}, {"tape": 0, "call": 0},
                    {"tape": 0, "fold": False}, {"tape": 0, "call": 0, "fold": False}):
        t0 = time.perf_counter()
        G = graph.build(rec, View(**options))
        flow = gradient_flow.flow_norms(rec, 0, 0, G) if "call" in options else None
        t1 = time.perf_counter()
        pos = layout.layered(G)
        t2 = time.perf_counter()
        figures.op_graph(G, pos, flow=flow)
        t3 = time.perf_counter()
        what = ("gradient flow" if flow else "op graph") + (
            ", unfolded" if options.get("fold") is False else "")
        print(f"  {len(rec.ops):6d} ops, {what:23s}: {t3 - t0:5.2f} s "
              f"(graph {t1 - t0:.2f}, layout {t2 - t1:.2f}, figure {t3 - t2:.2f}; "
              f"{G.number_of_nodes()} nodes)")


def server(args) -> None:
    from tapeviz import examples
    from tapeviz.server import runner
    pool = runner.Runner(runner.Config(warm=1))
    try:
        if pool.zygote is not None:
            pool.zygote.ready.wait(300)
        print(f"Run -> figure ready without a browser, seconds (median of {args.repeats}, "
              f"warm; cold: a worker that imports TensorFlow first):")
        for name in args.examples.split(","):
            source = examples.load(name).source
            cold_pool = runner.Runner(runner.Config(warm=0, zygote=False))
            try:
                cold = sum(run_to_figure(cold_pool, source)[:3])
            finally:
                cold_pool.close()
            rows = [run_to_figure(pool, source) for _ in range(args.repeats + 1)][1:]
            worker, drawing, figure = (statistics.median(r[i] for r in rows) for i in range(3))
            print(f"  {name:13s} worker round trip {worker:.2f}, graph + layout "
                  f"{drawing:.2f}, figure {figure:.2f}, figure JSON {rows[0][3] / 1024:.0f} "
                  f"KiB; cold {cold:.2f}")
        print("Figures of big recordings (graph + layout + figure), seconds:")
        for n in map(int, args.big.split(",")):
            big_figures(pool, n)
    finally:
        pool.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter,
                                     epilog="\n".join(__doc__.splitlines()[2:]))
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("browser")
    p.add_argument("--presses", type=int, default=6)
    p.add_argument("--examples", default="higher_order,mnist_step")
    p.add_argument("--load", type=int, default=0, help="busy loops beside the presses")
    p = sub.add_parser("profile")
    p.add_argument("--example", default="higher_order")
    p.add_argument("--top", type=int, default=25)
    p = sub.add_parser("server")
    p.add_argument("--examples", default="higher_order,mnist_step")
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--big", default="1000,10000", help="ops in each big recording")
    args = parser.parse_args()
    globals()[args.command](args)


if __name__ == "__main__":
    main()
