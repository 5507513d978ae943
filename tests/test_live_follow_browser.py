"""A practitioner's own run followed live in Chromium: `tapeviz record --live` on a custom
loop with argparse, and a plain `python` Keras fit() with tapeviz.keras.Watch followed by
`tapeviz view --follow`. The run view fills while the program runs; Stop on the page ends
the program its own way (KeyboardInterrupt, or fit()'s stop_training) and the file keeps
every step up to the stop."""
import json
import os
import signal
import subprocess
import sys
import time
import urllib.request

import pytest

from browser_util import (DRAWN, LIVE, ROOT, WAIT_MS, browser_page, count, free_port,
                          live_title, screenshot_path, served)

pytestmark = pytest.mark.slow

LOOP = '''"""A custom training loop, run as `python train.py --steps N --lr LR`."""
import argparse
import time

import tensorflow as tf

parser = argparse.ArgumentParser()
parser.add_argument("--steps", type=int, default=100)
parser.add_argument("--lr", type=float, default=0.05)
args = parser.parse_args()

tf.random.set_seed(1)
w = tf.Variable(tf.random.normal([8, 4]), name="w")
b = tf.Variable(tf.zeros([4]), name="b")
x = tf.random.normal([32, 8])
for step in range(args.steps):
    with tf.GradientTape() as tape:
        loss = tf.reduce_mean(tf.nn.relu(x @ w + b) ** 2)
    dw, db = tape.gradient(loss, [w, b])
    w.assign_sub(args.lr * dw)
    b.assign_sub(args.lr * db)
    if step % 200 == 0:
        print(f"step {step}: loss {float(loss):.4f}", flush=True)
    time.sleep(0.005)
print("finished")
'''

FIT = '''import numpy as np
import keras
import tapeviz.keras

keras.utils.set_random_seed(2)
rng = np.random.default_rng(0)
x = rng.normal(size=(64, 8, 8, 1)).astype("float32")
y = (x.mean(axis=(1, 2, 3)) > 0).astype("int32")
model = keras.Sequential([keras.Input((8, 8, 1)), keras.layers.Conv2D(4, 3, activation="relu"),
                          keras.layers.Flatten(), keras.layers.Dense(2)])
model.compile(optimizer="adam", loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
history = model.fit(x, y, batch_size=16, epochs=5000, verbose=0,
                    callbacks=[tapeviz.keras.Watch("run.json", every_s=0.5)])
print(f"fit ended after {len(history.history['loss'])} epochs")
'''

STOP = "Stop the program, keep the steps"


def wait_healthy(url: str, proc, seconds: float = 90) -> None:
    deadline = time.monotonic() + seconds
    while True:
        try:
            urllib.request.urlopen(url + "/_stcore/health", timeout=2)
            return
        except OSError:
            assert proc.poll() is None, "record --live ended before its app started"
            assert time.monotonic() < deadline, "record --live's app did not start"
            time.sleep(0.3)


def read_run(path) -> dict:
    return json.loads(path.read_text())


def test_record_live_charts_the_run_and_stop_keeps_every_step(tmp_path):
    program, out, port = tmp_path / "train.py", tmp_path / "run.json", free_port()
    program.write_text(LOOP)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    started = time.monotonic()
    cli = subprocess.Popen([sys.executable, "-m", "tapeviz", "record", "train.py", "-o", str(out),
                            "--live", "--port", str(port), "--", "--steps", "100000"],
                           cwd=tmp_path, env=env, stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        url = f"http://127.0.0.1:{port}"
        wait_healthy(url, cli)
        with browser_page() as page:
            page.set_viewport_size({"width": 1280, "height": 720})
            page.goto(url)
            page.wait_for_function(f"({LIVE}).length == 1 && ({DRAWN}).length >= 2",
                                   timeout=WAIT_MS)
            first = count(live_title(page))
            print(f"first live steps on the page {time.monotonic() - started:.1f} s after "
                  f"`record --live` started: {first}")
            page.wait_for_function(f"Number(({LIVE})[0].split(' ')[1].replace(/,/g, '')) > {first}",
                                   timeout=WAIT_MS)
            assert page.get_by_text("Following run.json while the program runs").is_visible()
            page.screenshot(path=screenshot_path("record_live_1280x720.png"))
            shown = count(live_title(page))
            page.get_by_role("button", name=STOP).click()
            page.get_by_text("to its end: drawn from the file").wait_for(timeout=WAIT_MS)
            page.get_by_text("The run, step by step").wait_for(timeout=WAIT_MS)
            page.get_by_text("stopped from tapeviz, as Ctrl+C would stop it").first.wait_for(
                timeout=WAIT_MS)
            page.screenshot(path=screenshot_path("record_live_stopped_1280x720.png"))
        rec = read_run(out)
        calls = [s["call"] for s in rec["steps"]]
        assert rec["running"] is False and rec["cut_short"]["why"] == "stopped"
        assert rec["error"]["type"] == "KeyboardInterrupt"
        assert calls == list(range(len(calls))) and shown <= len(calls) < 100000
        assert "step 0: loss" in rec["stdout"] and rec["argv"] == ["train.py", "--steps", "100000"]
        assert rec["tapes"], "the steps kept whole are in the recording"
    finally:
        cli.send_signal(signal.SIGINT)            # the app stays up until Ctrl+C
        _, err = cli.communicate(timeout=60)
    assert cli.returncode == 1, err[-3000:]      # the program ended with KeyboardInterrupt
    assert "stopped from the page" in err and "KeyboardInterrupt" in err
    assert not os.path.exists(f"{out}.stop")


def test_a_keras_fit_with_watch_is_followed_live_and_stopped_by_fit_itself(tmp_path):
    (tmp_path / "fit_cnn.py").write_text(FIT)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    program = subprocess.Popen([sys.executable, "fit_cnn.py"], cwd=tmp_path, env=env,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        with served(lambda port: [sys.executable, "-m", "tapeviz", "view", "--follow",
                                  str(tmp_path / "run.json"), "--headless", "--port", str(port)],
                    env={"PYTHONPATH": str(ROOT)}) as url, browser_page() as page:
            page.goto(url)
            page.wait_for_function(f"({LIVE}).length == 1 && "
                                   f"Number(({LIVE})[0].split(' ')[1].replace(/,/g, '')) >= 8 "
                                   f"&& ({DRAWN}).length == 3", timeout=WAIT_MS)
            # the program's text came with the file, after the page opened
            editor = page.frame_locator("iframe[title*='code_editor']").locator(
                "#REACT_ACE_EDITOR .ace_content")
            editor.get_by_text("history = model.fit(").wait_for(timeout=WAIT_MS)
            page.screenshot(path=screenshot_path("keras_watch_live_1600x1000.png"))
            shown = count(live_title(page))
            page.get_by_role("button", name=STOP).click()
            out, err = program.communicate(timeout=120)
            page.get_by_text("to its end: drawn from the file").wait_for(timeout=WAIT_MS)
            page.get_by_text("The run, step by step").wait_for(timeout=WAIT_MS)
            page.screenshot(path=screenshot_path("keras_watch_stopped_1600x1000.png"))
    finally:
        if program.poll() is None:
            program.kill()
            program.communicate()
    assert program.returncode == 0, err[-3000:]        # fit() returned; the program went on
    epochs = int(out.split("fit ended after ")[1].split()[0])
    assert epochs < 5000
    rec = read_run(tmp_path / "run.json")
    assert rec["running"] is False and len(rec["steps"]) >= shown
    # every step fit() took, 4 an epoch; it stopped inside its last one
    assert (epochs - 1) * 4 < len(rec["steps"]) <= epochs * 4
    assert any("stopped from the page" in w["message"] for w in rec["warnings"])
    assert {s["variable"] for s in rec["step_sources"]} == {
        "sequential/conv2d/kernel", "sequential/conv2d/bias", "sequential/dense/kernel",
        "sequential/dense/bias"}
