"""The training page holds still, in Chromium against a real server and real digits: sampled
every few seconds for half a minute of a run, every chart is in the page, drawn, and the loss
and gradient charts are on screen at 1280x720; and a closed tab's training worker goes to
the next tab's Start at once (a paused run too). Screenshots go to artifacts/."""
import io
import os
import time

import pytest
from PIL import Image

from browser_util import (ROOT, WAIT_MS, assert_no_exception, browser_page, screenshot_path,
                          streamlit_server)

pytestmark = pytest.mark.slow   # a Streamlit server and real training in Chromium

SHARED_MNIST = ROOT.parent / "shared" / "data" / "mnist"
MNIST = os.environ.get("TAPEVIZ_MNIST_DIR") or (str(SHARED_MNIST) if SHARED_MNIST.is_dir() else None)
# Every chart is Vega-Lite, in page order: the two beside each other on top first
CHARTS = ("loss", "grad", "accuracy", "predictions", "histograms", "activations")
# Per chart in page order: [drawn (a canvas or svg with a box), whole on screen, top, bottom,
# drawn height]
VEGA = """() => Array.from(document.querySelectorAll("[data-testid='stVegaLiteChart']")).map(c => {
  const r = c.getBoundingClientRect(), d = c.querySelector('canvas, svg');
  const b = d ? d.getBoundingClientRect() : {height: 0};
  return [b.height > 0, r.top >= 0 && r.bottom <= window.innerHeight && r.right <= window.innerWidth,
          Math.round(r.top), Math.round(r.bottom), Math.round(b.height)];
})"""
# Back to the page's top, where the user reads it: the ink checks scroll charts into view
TOP = """() => { for (let e = document.querySelector("[data-testid='stVegaLiteChart']"); e;
                  e = e.parentElement) e.scrollTop = 0; window.scrollTo(0, 0); }"""
STEP = "() => +((document.body.innerText.match(/step ([0-9,]+) of/) || [0, '0'])[1].replace(/,/g, ''))"
STATUS = "() => document.body.innerText"
# Samples 4 s apart: half a minute of a run (a minute cost the suite two more minutes; the
# charts' blanking it catches came within seconds of each update)
SAMPLES = 8
# The progress bar's label once a step has been trained: "step 12 of 750 · epoch 1 of 3".
TRAINING = "() => /step [1-9][0-9,]* of/.test(document.body.innerText)"


@pytest.fixture(scope="module")
def server():
    if not MNIST:
        pytest.skip("the real MNIST is not here (set TAPEVIZ_MNIST_DIR)")
    with streamlit_server({"TAPEVIZ_MNIST_DIR": MNIST}) as url:
        yield url


def ink(page, chart: str) -> float:
    """The share of a chart's drawn pixels that are not paper (darker than light grey)."""
    shot = page.locator("[data-testid='stVegaLiteChart']").nth(CHARTS.index(chart)).screenshot()
    image = Image.open(io.BytesIO(shot)).convert("L")
    return sum(image.histogram()[:200]) / (image.width * image.height)


def open_training_page(page, server):
    page.goto(server)
    page.get_by_role("link", name="Train MNIST").click()
    start = page.get_by_role("button", name="Start", exact=True)
    start.wait_for(timeout=WAIT_MS)
    page.wait_for_timeout(1000)
    return start


def test_every_chart_stays_on_the_page_through_half_a_minute_of_training(server):
    with browser_page() as page:
        page.set_viewport_size({"width": 1280, "height": 720})
        open_training_page(page, server).click()
        page.wait_for_function(TRAINING, timeout=WAIT_MS)
        page.wait_for_function(f"({VEGA})().length == {len(CHARTS)}", timeout=WAIT_MS)
        page.wait_for_timeout(3000)
        samples, loss_points = [], 0
        for i in range(SAMPLES):                 # every 4 s for half a minute
            page.wait_for_timeout(4000)
            page.evaluate(TOP)
            sample = dict(zip(CHARTS, page.evaluate(VEGA)))
            samples.append(sample)
            page.screenshot(path=screenshot_path(f"train_steady_{i:02d}.png"))
            missing = [key for key in CHARTS if key not in sample or not sample[key][0]]
            assert not missing, (i, missing, sample)
            # drawn, not blank: what a remounted chart showed between its updates
            blank = [key for key in CHARTS if ink(page, key) < 0.005]
            assert not blank, (i, blank, sample)
            assert sample["loss"][1] and sample["grad"][1], (i, sample)
            points = page.evaluate(STEP)
            assert points >= loss_points, (i, points, loss_points)
            loss_points = points
        assert loss_points > 20, samples[-1]                             # it trained meanwhile
        assert samples[-1]["histograms"][4] > 300, samples[-1]           # a strip per variable
        assert samples[-1]["activations"][4] > 150, samples[-1]          # a strip per layer
        assert ink(page, "predictions") > 0.04, "the digits, not the waiting note"
        assert_no_exception(page)
        page.set_viewport_size({"width": 1600, "height": 1000})
        page.wait_for_timeout(2000)
        page.screenshot(path=screenshot_path("train_steady_1600x1000.png"))
        page.get_by_role("button", name="Reset", exact=True).click()


def test_a_closed_tabs_worker_goes_to_the_next_tabs_start(server):
    """The first tab pauses its run (its worker waits, held) and closes; the second tab's
    Start must not wait for the closed session to be forgotten (it waited 68-91 s)."""
    with browser_page() as first:
        open_training_page(first, server).click()
        first.wait_for_function(TRAINING, timeout=WAIT_MS)
        first.get_by_role("button", name="Stop", exact=True).click()
        first.wait_for_function("() => document.body.innerText.includes('Paused')", timeout=60_000)
        second = first.context.browser.new_page(viewport={"width": 1280, "height": 720})
        start = open_training_page(second, server)
        first.close()
        closed = time.monotonic()
        start.click()
        second.wait_for_function(TRAINING, timeout=45_000)
        waited = time.monotonic() - closed
        print(f"the second tab's run trained {waited:.1f} s after the first tab closed")
        assert "in line for a training worker" not in second.evaluate(STATUS)
        second.get_by_role("button", name="Reset", exact=True).click()
