"""Where the browser spends a Run press: a Chrome CPU profile of one press, by function.

Starts the app and chromium as bench_page.py does, opens `?example=NAME`, presses Run once
to warm up, then profiles the next press (Chrome DevTools Protocol, `Profiler`) until the
graph is drawn. Prints the press's split, then the functions with the most self time and
the most inclusive time (a function's callers included once per sample). This is how the
WebGL set-up behind a few point-less Scattergl traces was found (`getContext` near the top).

    python bench/profile_page.py [--example higher_order] [--top 25]
"""
import argparse
import collections
import os
import signal
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_page  # noqa: E402


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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--example", default="higher_order")
    parser.add_argument("--top", type=int, default=25)
    args = parser.parse_args()
    from playwright.sync_api import sync_playwright
    proc, url = bench_page.start_server()
    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=bench_page.CHROMIUM,
                                        args=bench_page.ARGS)
            page = browser.new_page(viewport={"width": 1600, "height": 1000})
            bench_page.open_example(page, url, args.example)
            bench_page.press_run(page)                    # warm: the next press is profiled
            cdp = page.context.new_cdp_session(page)
            cdp.send("Profiler.enable")
            cdp.send("Profiler.setSamplingInterval", {"interval": 200})   # microseconds
            cdp.send("Profiler.start")
            split = bench_page.press_run(page)
            profile = cdp.send("Profiler.stop")["profile"]
            browser.close()
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
    print(f"{args.example}: " + ", ".join(f"click -> {k} {v:.2f} s" for k, v in split.items()))
    own, inclusive = by_function(profile)
    for title, counts in (("self time", own), ("inclusive time", inclusive)):
        print(f"by {title}, ms:")
        for name, ms in counts.most_common(args.top):
            print(f"  {ms:7.1f}  {name}")


if __name__ == "__main__":
    main()
