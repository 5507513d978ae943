"""A lesson link as a class meets it: from opening `?example=NAME` in a fresh browser to the
lesson readable: its graph painted with its labels, the editor showing the program, and no
run in progress. Measured in Debian's chromium, each open in a browser of its own (so the
app's frontend code is fetched again, as on a student's first visit).

    python bench/arrival.py [--example higher_order] [--warm 5] [--fresh 3] [--load 0]
        [--size 1280x720]
        fresh: a server started for each open, the link opened as soon as it answers;
        warm: one server, already past its first page, opened --warm times.
        --load N runs N busy loops beside it (a machine with other work).
Prints each time, the median [min-max] of each kind, and what the page's own status line
said ("Run → drawn in ..."), which is timed on the server.
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

# Readable: the graph's labels drawn, the editor's text in its frame, no run in progress
READABLE = """() => {
  const labels = document.querySelectorAll('.st-key-graph .js-plotly-plot .textpoint text');
  if (labels.length === 0) return false;
  if (document.querySelector('[data-testid="stStatusWidget"]')) return false;
  const frame = document.querySelector("iframe[title*='code_editor']");
  const doc = frame && frame.contentDocument;
  const code = doc && doc.querySelector('.ace_content');
  return !!(code && code.innerText.trim().length > 0);
}"""
STATUS = re.compile(r"(?:Run → d|D)rawn in [^\n]*")


def open_link(chromium, url: str, example: str, size: tuple) -> tuple:
    """(seconds from opening the link to the lesson readable, the page's status line)."""
    context = chromium.new_context(viewport={"width": size[0], "height": size[1]})
    page = context.new_page()
    try:
        t0 = time.perf_counter()
        page.goto(f"{url}/?example={example}")
        page.wait_for_function(READABLE, timeout=300_000, polling="raf")
        seconds = time.perf_counter() - t0
        found = STATUS.search(page.inner_text("body"))
        return seconds, found.group(0) if found else "(no status line)"
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
                    print(f"fresh server {i + 1}: {fresh[-1][0]:.1f} s; the page said "
                          f"{fresh[-1][1]!r}", flush=True)
            with browser_util.streamlit_server(env={"TF_CPP_MIN_LOG_LEVEL": "3"}) as url:
                open_link(chromium, url, args.example, size)          # its first page
                for i in range(args.warm):
                    warm.append(open_link(chromium, url, args.example, size))
                    print(f"warm server, open {i + 1}: {warm[-1][0]:.1f} s; the page said "
                          f"{warm[-1][1]!r}", flush=True)
        finally:
            chromium.close()
    print(f"?example={args.example} at {args.size}, {args.load} busy loops beside it: "
          f"open -> readable")
    if fresh:
        print(f"  fresh server: {summary([t for t, _ in fresh])}")
    if warm:
        print(f"  warm server:  {summary([t for t, _ in warm])}")


if __name__ == "__main__":
    main()
