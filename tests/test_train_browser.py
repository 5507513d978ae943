"""The training page in a real browser: press Start and watch the loss chart gain points.

Saves a screenshot to artifacts/ (docs/train_page.png, which the README shows, with
TAPEVIZ_UPDATE_DOCS=1).
"""
import os

import pytest

from browser_util import (ROOT, WAIT_MS, assert_no_exception, browser_page, screenshot_path, settle,
                          streamlit_server)

pytestmark = pytest.mark.slow   # a Streamlit server driven in Chromium

SHARED_MNIST = ROOT.parent / "shared" / "data" / "mnist"
# The real digits: the environment's, else the shared folder beside the checkout.
MNIST = os.environ.get("TAPEVIZ_MNIST_DIR") or (str(SHARED_MNIST) if SHARED_MNIST.is_dir() else None)
# Where an element's box lies against the window, as the browser measured it.
IN_VIEW = """el => { const r = el.getBoundingClientRect();
    return r.height > 0 && r.top >= 0 && r.bottom <= window.innerHeight && r.right <= window.innerWidth; }"""
# The i-th Vega-Lite chart (0: the loss, 1: the gradient norms beside it) is drawn and
# whole on screen.
VEGA_IN_VIEW = """i => { const c = document.querySelectorAll("[data-testid='stVegaLiteChart']")[i];
    return !!c && !!c.querySelector('canvas, svg') && (""" + IN_VIEW + """)(c); }"""
LOSS_IN_VIEW = f"() => ({VEGA_IN_VIEW})(0)"
# What the gradient chart (Vega-Lite) shows, as its pixels (null before it is drawn): its
# points are not in the page, but a chart that gains points draws other pixels.
GRAD_PIXELS = """() => { const c = document.querySelectorAll("[data-testid='stVegaLiteChart']")[1];
    const d = c && c.querySelector('canvas, svg');
    return !d || !d.getBoundingClientRect().height ? null
         : d.tagName == 'CANVAS' ? d.toDataURL() : d.outerHTML; }"""
STEP = "() => +((document.body.innerText.match(/step ([0-9,]+) of/) || [0, '0'])[1].replace(/,/g, ''))"

# The evaluations drawn on the held-out accuracy chart (the third Vega-Lite chart): its
# points, as the svg Streamlit's Vega draws them (the first layer's line points)
ACCURACY_POINTS = """() => { const c = document.querySelectorAll("[data-testid='stVegaLiteChart']")[2];
    const layer = c && c.querySelector('g.mark-symbol');
    return layer ? layer.querySelectorAll('path').length : -1; }"""


@pytest.fixture(scope="module")
def server():
    env = {"TAPEVIZ_MNIST_DIR": MNIST} if MNIST else {}
    with streamlit_server(env) as url:
        yield url


def test_start_and_the_loss_chart_gains_points(server):
    with browser_page() as page:
        page.goto(server)              # and follow the link, as a user does (a first visit
        page.get_by_role("link", name="Train MNIST").click()   # straight to /train is not the same)
        start = page.get_by_role("button", name="Start", exact=True)
        start.wait_for(timeout=60_000)
        assert_no_exception(page)
        start.click()
        page.wait_for_function(f"({STEP})() > 1 && ({GRAD_PIXELS})() !== null", timeout=WAIT_MS)
        page.evaluate(f"window.gradChart = ({GRAD_PIXELS})(); window.gradStep = ({STEP})()")
        # more steps trained, and the gradient chart drew them (in place: see test_live_browser)
        page.wait_for_function(f"({STEP})() > window.gradStep && ({GRAD_PIXELS})() !== null"
                               f" && ({GRAD_PIXELS})() !== window.gradChart", timeout=WAIT_MS)
        # The held-out accuracy (every 50 steps) and the predictions follow.
        page.wait_for_function(f"({ACCURACY_POINTS})() >= 2", timeout=WAIT_MS)
        page.wait_for_timeout(1500)     # let the last redraw land before the screenshot
        assert_no_exception(page)
        assert "Data:" in page.inner_text("body")
        page.set_viewport_size({"width": 1600, "height": 1900})     # every chart in one picture
        page.wait_for_timeout(1500)
        page.screenshot(path=screenshot_path("train_page.png"))
        page.get_by_role("button", name="Reset", exact=True).click()
        page.get_by_text("then press Start").wait_for(timeout=30_000)


def test_the_loss_chart_is_above_the_fold_at_1280x720_and_no_request_leaves_the_app(server):
    """A projector's size: the loss chart is on screen with no scrolling while the run trains
    and after it finished. Every request either page makes goes to the app itself (offline,
    a web font or icon from elsewhere fails and the browser logs it)."""
    with browser_page() as page:
        page.set_viewport_size({"width": 1280, "height": 720})
        asked = []
        page.on("request", lambda request: asked.append(request.url))
        page.goto(server)
        settle(page, WAIT_MS)
        page.get_by_role("link", name="Train MNIST").click()
        page.get_by_role("button", name="Start", exact=True).wait_for(timeout=WAIT_MS)
        # A short run: 2,000 digits for one epoch
        page.locator("[data-testid='stNumberInput'] input").first.fill("1")
        page.keyboard.press("Enter")
        page.locator("[data-testid='stSelectbox']", has_text="Digits used").click()
        page.get_by_role("option", name="2,000", exact=True).click()
        page.wait_for_timeout(500)
        page.get_by_role("button", name="Start", exact=True).click()
        page.wait_for_function(f"({STEP})() > 3 && ({GRAD_PIXELS})() !== null", timeout=WAIT_MS)
        page.screenshot(path=screenshot_path("train_1280x720_training.png"))
        page.wait_for_function(LOSS_IN_VIEW, timeout=10_000)
        page.wait_for_function(VEGA_IN_VIEW, arg=1, timeout=10_000)   # the gradients beside it
        page.get_by_text("Finished").first.wait_for(timeout=WAIT_MS)
        page.wait_for_timeout(1500)
        page.screenshot(path=screenshot_path("train_1280x720_finished.png"))
        page.wait_for_function(LOSS_IN_VIEW, timeout=10_000)
        assert_no_exception(page)
    elsewhere = [url for url in asked if not url.startswith((server, "data:", "blob:", "about:"))]
    assert asked and not elsewhere, elsewhere
