"""The app in a real browser: `streamlit run app.py` driven by Playwright through Debian's chromium.

Saves screenshots to artifacts/ (docs/, which the README shows, with TAPEVIZ_UPDATE_DOCS=1).
"""
import pytest

from browser_util import (WAIT_MS, assert_no_exception, browser_page, screenshot_path,
                          streamlit_server)


@pytest.fixture(scope="module")
def server():
    with streamlit_server() as url:
        yield url


@pytest.fixture(scope="module")
def page():
    with browser_page() as page:
        yield page


def open_example(page, server, name):
    page.goto(f"{server}/?example={name}")
    page.wait_for_selector(".js-plotly-plot .scatterlayer, .js-plotly-plot canvas", timeout=WAIT_MS)
    page.wait_for_function("document.querySelectorAll('.js-plotly-plot').length > 0")
    page.wait_for_timeout(1500)     # let plotly finish laying out the labels before a screenshot


def test_higher_order_in_the_browser(server, page):
    open_example(page, server, "higher_order")
    text = page.inner_text("body")
    assert "3.0" in text and "6.0" in text
    assert_no_exception(page)
    assert "example=higher_order" in page.url
    page.screenshot(path=screenshot_path("debugger_higher_order.png"))


def test_mnist_step_grouped_by_layer(server, page):
    open_example(page, server, "mnist_step")
    assert_no_exception(page)
    assert "global_average_pooling2d" in page.inner_text("body") or page.locator("text=conv2d").count()
    page.screenshot(path=screenshot_path("debugger_mnist_step.png"))
