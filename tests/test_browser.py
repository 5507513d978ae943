"""The app in a real browser: `streamlit run app.py` driven by Playwright through Debian's chromium.

Saves the screenshots the README shows (docs/debugger_*.png).
"""
import os
import pathlib
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
CHROMIUM = "/usr/bin/chromium"
ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
        "--disable-sync", "--no-first-run"]
VIEWPORT = {"width": 1600, "height": 1000}
WAIT_MS = 180_000    # the first run imports TensorFlow in a fresh worker

sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed (pip install playwright)")
if not os.path.exists(CHROMIUM):
    pytest.skip(f"{CHROMIUM} is missing (apt-get install chromium)", allow_module_level=True)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def server():
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "streamlit", "run", "app.py", "--server.headless", "true",
         "--server.port", str(port), "--browser.gatherUsageStats", "false"],
        cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        start_new_session=True)    # its own process group: teardown kills its workers too
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                urllib.request.urlopen(url + "/_stcore/health", timeout=2)
                break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    pytest.fail("streamlit did not start")
                time.sleep(0.3)
        yield url
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


@pytest.fixture(scope="module")
def page():
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        yield browser.new_page(viewport=VIEWPORT)
        browser.close()


def open_example(page, server, name):
    page.goto(f"{server}/?example={name}")
    page.wait_for_selector(".js-plotly-plot .scatterlayer, .js-plotly-plot canvas", timeout=WAIT_MS)
    page.wait_for_function("document.querySelectorAll('.js-plotly-plot').length > 0")
    page.wait_for_timeout(1500)     # let plotly finish laying out the labels before a screenshot


def assert_no_exception(page):
    text = page.inner_text("body")
    assert "Traceback" not in text
    assert page.locator("[data-testid='stException']").count() == 0


def test_higher_order_in_the_browser(server, page):
    open_example(page, server, "higher_order")
    text = page.inner_text("body")
    assert "3.0" in text and "6.0" in text
    assert_no_exception(page)
    assert "example=higher_order" in page.url
    page.screenshot(path=str(ROOT / "docs" / "debugger_higher_order.png"))


def test_mnist_step_grouped_by_layer(server, page):
    open_example(page, server, "mnist_step")
    assert_no_exception(page)
    assert "global_average_pooling2d" in page.inner_text("body") or page.locator("text=conv2d").count()
    page.screenshot(path=str(ROOT / "docs" / "debugger_mnist_step.png"))
