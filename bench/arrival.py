"""A lesson link as a class meets it: from opening `?example=NAME` in a fresh browser to
- painted: the lesson's graph on screen, with its labels (the first picture, or Plotly's chart);
- interactive: Plotly's chart drawn (hover, click, zoom);
- readable: the graph painted, the editor showing the program, and no run in progress.
Measured in Debian's chromium, each open in a browser of its own (so the app's frontend code
is fetched again, as on a student's first visit).

    python bench/arrival.py [--example higher_order] [--warm 5] [--fresh 3] [--load 0]
        [--size 1280x720]
        fresh: a server started for each open, the link opened as soon as it answers;
        warm: one server, already past its first page, opened --warm times.
        --load N runs N busy loops beside it (a machine with other work).
Prints each time, the median [min-max] of each kind, and what the page's own status line
said ("Painted in ... s after the page opened", timed by the browser).
"""
import argparse
import contextlib
import multiprocessing
import re
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

import browser_util  # noqa: E402  (the browser tests' server and chromium)

# Each moment as the page reaches it (ms since it opened), polled every animation frame
MOMENTS = """() => {
  const seen = window.__arrival || (window.__arrival = {});
  const now = Math.round(performance.now());
  const picture = document.querySelector('.st-key-graph_area .tv-first-paint img');
  const labels = document.querySelectorAll('.st-key-graph .js-plotly-plot .textpoint text').length > 0;
  if (seen.painted === undefined && (labels || (picture && picture.complete && picture.naturalWidth > 0)))
    seen.painted = now;
  if (seen.interactive === undefined && labels) seen.interactive = now;
  const frame = document.querySelector("iframe[title*='code_editor']");
  const doc = frame && frame.contentDocument;
  const code = doc && doc.querySelector('.ace_content');
  if (seen.editor === undefined && code && code.innerText.trim().length > 0) seen.editor = now;
  const idle = !document.querySelector('[data-testid="stStatusWidget"]');
  if (seen.readable === undefined && seen.painted !== undefined && seen.editor !== undefined && idle)
    seen.readable = now;
  return seen.readable !== undefined && seen.interactive !== undefined ? seen : false;
}"""
STATUS = re.compile(r"(?:Run → d|D)rawn in [^\n]*|Painted [^\n]*")
KINDS = ("painted", "interactive", "readable")


def open_link(chromium, url: str, example: str, size: tuple) -> tuple:
    """({kind: seconds from opening the link}, the page's status line)."""
    context = chromium.new_context(viewport={"width": size[0], "height": size[1]})
    page = context.new_page()
    try:
        page.goto(f"{url}/?example={example}")
        moments = page.wait_for_function(MOMENTS, timeout=300_000, polling="raf").json_value()
        with contextlib.suppress(Exception):      # the browser's report reruns the page once
            page.wait_for_function("() => /Painted/.test(document.body.innerText)", timeout=30_000)
        found = STATUS.search(page.inner_text("body"))
        return ({kind: moments[kind] / 1000 for kind in KINDS},
                found.group(0) if found else "(no status line)")
    finally:
        context.close()


def _busy(stop) -> None:
    while not stop.is_set():
        sum(i * i for i in range(10_000))


@contextlib.contextmanager
def load(n: int):
    stop = multiprocessing.Event()
    procs = [multiprocessing.Process(target=_busy, args=(stop,), daemon=True) for _ in range(n)]
    for p in procs:
        p.start()
    try:
        yield
    finally:
        stop.set()
        for p in procs:
            p.join(5)


def said(moments: dict) -> str:
    return ", ".join(f"{kind} {moments[kind]:.1f} s" for kind in KINDS)


def summary(times: list) -> str:
    return f"{statistics.median(times):.1f} s [{min(times):.1f}-{max(times):.1f}]"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--example", default="higher_order")
    parser.add_argument("--warm", type=int, default=5)
    parser.add_argument("--fresh", type=int, default=3)
    parser.add_argument("--load", type=int, default=0)
    parser.add_argument("--size", default="1280x720")
    args = parser.parse_args()
    size = tuple(int(x) for x in args.size.split("x"))
    from playwright.sync_api import sync_playwright
    fresh, warm = [], []
    with load(args.load), sync_playwright() as p:
        chromium = p.chromium.launch(executable_path=browser_util.CHROMIUM, args=browser_util.ARGS)
        try:
            for i in range(args.fresh):
                with browser_util.streamlit_server(env={"TF_CPP_MIN_LOG_LEVEL": "3"}) as url:
                    fresh.append(open_link(chromium, url, args.example, size))
                    print(f"fresh server {i + 1}: {said(fresh[-1][0])}; the page said "
                          f"{fresh[-1][1]!r}", flush=True)
            with browser_util.streamlit_server(env={"TF_CPP_MIN_LOG_LEVEL": "3"}) as url:
                open_link(chromium, url, args.example, size)          # its first page
                for i in range(args.warm):
                    warm.append(open_link(chromium, url, args.example, size))
                    print(f"warm server, open {i + 1}: {said(warm[-1][0])}; the page said "
                          f"{warm[-1][1]!r}", flush=True)
        finally:
            chromium.close()
    print(f"?example={args.example} at {args.size}, {args.load} busy loops beside it: "
          f"from opening the link, median [min-max]")
    for name, runs in (("fresh server", fresh), ("warm server", warm)):
        if runs:
            print(f"  {name}: " + ", ".join(f"{kind} {summary([m[kind] for m, _ in runs])}" for kind in KINDS))


if __name__ == "__main__":
    main()
