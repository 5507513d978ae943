"""The training page in a real browser: press Start and watch the loss chart gain points.

Saves a screenshot to artifacts/ (docs/train_page.png, which the README shows, with
TAPEVIZ_UPDATE_DOCS=1).
"""
import pytest

from browser_util import (ROOT, WAIT_MS, assert_no_exception, browser_page, screenshot_path,
                          streamlit_server)

pytestmark = pytest.mark.slow   # a Streamlit server driven in Chromium

SHARED_MNIST = ROOT.parent / "shared" / "data" / "mnist"

# The number of points in the first trace of the plotly chart whose title holds `title`
# (Streamlit wraps titles in <b>), or -1 before there is one.
POINTS = """title => Math.max(-1, ...Array.from(document.querySelectorAll('.js-plotly-plot'))
  .filter(p => p.layout && p.layout.title && String(p.layout.title.text).includes(title))
  .map(p => p.data.length && p.data[0].x ? p.data[0].x.length : -1))"""


@pytest.fixture(scope="module")
def server():
    env = {"TAPEVIZ_MNIST_DIR": str(SHARED_MNIST)} if SHARED_MNIST.is_dir() else {}
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
        page.wait_for_function(f"({POINTS})('Training loss') > 0", timeout=WAIT_MS)
        first = page.evaluate(POINTS, "Training loss")
        page.wait_for_function(f"({POINTS})('Training loss') > {first}", timeout=WAIT_MS)
        # The held-out accuracy (every 50 steps) and the predictions follow.
        page.wait_for_function(f"({POINTS})('Held-out accuracy') >= 2", timeout=WAIT_MS)
        page.wait_for_timeout(1500)     # let plotly finish drawing before the screenshot
        assert_no_exception(page)
        assert "Data:" in page.inner_text("body")
        page.set_viewport_size({"width": 1600, "height": 1900})     # every chart in one picture
        page.wait_for_timeout(1500)
        page.screenshot(path=screenshot_path("train_page.png"))
        page.get_by_role("button", name="Reset", exact=True).click()
        page.get_by_text("then press Start").wait_for(timeout=30_000)
