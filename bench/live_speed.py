"""What a practitioner waits for when following their own run live: `tapeviz record --live`
on a custom training loop, in Debian's chromium.

    python bench/live_speed.py [--runs 3]

Each run starts the command fresh (its worker imports TensorFlow, its app starts), opens the
page as soon as the app answers, and times: the command's start -> the first steps charted
on the page; Stop pressed -> the finished run drawn ("The run, step by step"). Medians with
[min-max] over the runs.
"""
import argparse
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

import browser_util  # noqa: E402  (the browser tests' chromium and the live view's marks)

LOOP = '''import argparse, time
import tensorflow as tf

parser = argparse.ArgumentParser()
parser.add_argument("--steps", type=int, default=100000)
args = parser.parse_args()
w = tf.Variable(tf.random.normal([32, 16]))
x = tf.random.normal([64, 32])
for step in range(args.steps):
    with tf.GradientTape() as tape:
        loss = tf.reduce_mean(tf.nn.relu(x @ w) ** 2)
    w.assign_sub(0.01 * tape.gradient(loss, w))
    time.sleep(0.002)
'''


def one_run(folder: Path, page) -> tuple:
    (folder / "train.py").write_text(LOOP)
    port = browser_util.free_port()
    url = f"http://127.0.0.1:{port}"
    started = time.monotonic()
    cli = subprocess.Popen([sys.executable, "-m", "tapeviz", "record", "train.py", "-o",
                            "run.json", "--live", "--port", str(port)], cwd=folder,
                           env={**os.environ, "PYTHONPATH": str(ROOT),
                                "TF_CPP_MIN_LOG_LEVEL": "3"},
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                           start_new_session=True)
    try:
        while True:
            try:
                urllib.request.urlopen(url + "/_stcore/health", timeout=1)
                break
            except OSError:
                time.sleep(0.1)
        page.goto(url)
        page.wait_for_function(f"({browser_util.LIVE}).length == 1", timeout=180_000)
        first = time.monotonic() - started
        page.wait_for_timeout(1000)
        clicked = time.monotonic()
        page.get_by_role("button", name="Stop the program, keep the steps").click()
        page.get_by_text("The run, step by step").wait_for(timeout=180_000)
        stopped = time.monotonic() - clicked
    finally:
        cli.send_signal(signal.SIGINT)
        cli.wait(60)
    return first, stopped


def spread(values: list) -> str:
    return f"{statistics.median(values):.1f} s [{min(values):.1f}-{max(values):.1f}]"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    firsts, stops = [], []
    with browser_util.sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=browser_util.CHROMIUM, args=browser_util.ARGS)
        for i in range(args.runs):
            page = browser.new_page(viewport={"width": 1280, "height": 720})
            with tempfile.TemporaryDirectory() as folder:
                first, stopped = one_run(Path(folder), page)
            page.close()
            firsts.append(first)
            stops.append(stopped)
            print(f"run {i + 1}: first steps on the page {first:.1f} s after the command "
                  f"started; Stop -> the finished run drawn {stopped:.1f} s", flush=True)
        browser.close()
    print(f"record --live, command start -> first steps charted: {spread(firsts)}")
    print(f"Stop pressed -> the finished run drawn: {spread(stops)}")


if __name__ == "__main__":
    main()
