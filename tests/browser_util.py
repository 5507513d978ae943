"""Shared by the browser tests: `streamlit run app.py` on a free port in its own process
group, and Debian's chromium driven by Playwright. Skips the importing module when either
is missing."""
import contextlib
import os
import pathlib
import signal
import socket
import subprocess
import sys
import tempfile
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


# What a failed browser test left, for its report (tests/conftest.py prints it): the open
# pages and the live servers' logs. A hang seen once in CI under load is then readable.
OPEN_PAGES: list = []
SERVER_LOGS: list = []
FAILED: list = []            # (title, text) of pages and servers an exception closed


def page_state(page) -> tuple:
    """The page's address and text, or why they could not be read."""
    try:
        script = page.evaluate("""() => { const app = document.querySelector('[data-test-script-state]');
            return app ? app.getAttribute('data-test-script-state') : 'no app element'; }""")
        return page.url, f"script: {script}", page.inner_text("body", timeout=5_000)[-4_000:]
    except Exception as exc:  # noqa: BLE001 - a crashed page: say so in the report
        return getattr(page, "url", "?"), f"(could not read the page: {exc})", ""


def log_tail(path: str) -> str:
    with open(path, errors="replace") as log:
        return "".join(log.readlines()[-60:])


def screenshot_path(name: str) -> str:
    """Where a test's screenshot goes: artifacts/ (untracked) by default, so running the
    tests leaves the work tree clean; docs/ (what the README shows) with TAPEVIZ_UPDATE_DOCS=1."""
    folder = ROOT / ("docs" if os.environ.get("TAPEVIZ_UPDATE_DOCS") == "1" else "artifacts")
    folder.mkdir(exist_ok=True)
    return str(folder / name)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def streamlit_server(env=None):
    """The app's URL while it runs; its process group (workers included) is killed after."""
    with served(lambda port: [sys.executable, "-m", "streamlit", "run", "app.py", "--server.headless", "true",
                              "--server.port", str(port), "--browser.gatherUsageStats", "false"],
                env=env) as url:
        yield url


@contextlib.contextmanager
def served(command, cwd=ROOT, env=None):
    """The URL of the app that `command(port)` starts, while it runs (e.g. `tapeviz view`)."""
    port = free_port()
    log = tempfile.NamedTemporaryFile(prefix="tapeviz-server-", suffix=".log")
    proc = subprocess.Popen(
        command(port), cwd=cwd, stdout=log, stderr=subprocess.STDOUT,
        env={**os.environ, **(env or {})},
        start_new_session=True)    # its own process group: teardown kills its workers too
    url = f"http://127.0.0.1:{port}"
    SERVER_LOGS.append(log.name)
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
    except BaseException:
        FAILED.append(("server log (tail)", log_tail(log.name)))
        raise
    finally:
        SERVER_LOGS.remove(log.name)
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        log.close()


def server_pid(url: str):
    """The pid of the Streamlit server listening at `url`, found by its command line."""
    port = url.rsplit(":", 1)[1].encode()
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                cmd = open(f"/proc/{entry}/cmdline", "rb").read().split(b"\0")
            except OSError:
                continue
            if b"streamlit" in b" ".join(cmd) and port in cmd:
                return int(entry)
    return None


@contextlib.contextmanager
def chromium():
    """Chromium under Playwright, for a module's tests to share through a module-scoped
    fixture (its launch costs a second each time): each browser_page(browser) in it is still
    a context of its own, with no cookies, storage or cache of another page's."""
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        try:
            yield browser
        finally:
            browser.close()


@contextlib.contextmanager
def browser_page(browser=None):
    """A page in a fresh context of `browser`, or of a Chromium launched for it alone."""
    if browser is None:
        with chromium() as browser, browser_page(browser) as page:
            yield page
        return
    page = browser.new_page(viewport=VIEWPORT)
    OPEN_PAGES.append(page)
    try:
        yield page
    except BaseException:
        FAILED.append(("page when the test failed", "\n".join(page_state(page))))
        raise
    finally:
        OPEN_PAGES.remove(page)
        page.context.close()


def assert_no_exception(page):
    """No exception of the app's own. A program's uncaught error is printed to its stderr
    as Python prints it, and the page shows that stderr in a code block: a traceback there
    is the program's, whose frames are the program's files, never tapeviz's or Streamlit's."""
    assert page.locator("[data-testid='stException']").count() == 0
    outside = page.evaluate("""() => { const body = document.body.cloneNode(true);
        body.querySelectorAll("[data-testid='stCode']").forEach(e => e.remove());
        return body.innerText; }""")
    assert "Traceback" not in outside
    for block in page.locator("[data-testid='stCode']").all_inner_texts():
        if "Traceback" in block:
            assert "tapeviz" not in block and "streamlit" not in block, block


# The page's script is not running: Streamlit's own mark on the app's root element.
SETTLED = """() => { const app = document.querySelector('[data-test-script-state]');
    return app && app.getAttribute('data-test-script-state') === 'notRunning'; }"""


def settle(page, timeout_ms: int) -> None:
    """Wait for the debugger's first drawing and the rerun it makes on its own (the window's
    width and room reported): a click or an upload during that rerun can be lost."""
    page.wait_for_selector(".js-plotly-plot, [data-testid='stAlert']", timeout=timeout_ms)
    for _ in range(2):
        page.wait_for_function(SETTLED, timeout=timeout_ms)
        page.wait_for_timeout(1500)


# The live run view's headlines ("live: 1,234 gradient calls so far, line 10"), one per
# charted call, and its charts' drawings (Vega-Lite draws a canvas or an svg) in page order
LIVE = """Array.from(document.querySelectorAll("[data-testid='stMarkdownContainer']"))
    .map(e => e.innerText.trim()).filter(t => t.startsWith('live:'))"""
DRAWN = """Array.from(document.querySelectorAll("[data-testid='stVegaLiteChart']"))
    .map(c => c.querySelector('canvas, svg')).filter(d => d && d.getBoundingClientRect().height > 0)"""


def live_title(page) -> str:
    return "".join(page.evaluate(LIVE))


def count(title: str) -> int:
    """The gradient calls a live headline counts."""
    return int(title.split()[1].replace(",", ""))


def compare_view_on_screen(page, size, drawn_js: str, timeout_ms: int = 60_000) -> str:
    """The compare view's text once its two charts are drawn (`drawn_js`, a JS test of one
    chart `c`) and each is mostly on screen in a window of `size`."""
    view = page.locator(".st-key-compare_view")
    view.wait_for(timeout=timeout_ms)
    page.wait_for_function(f"""() => {{
        const charts = document.querySelectorAll('.st-key-compare_view .js-plotly-plot');
        return charts.length === 2 && [...charts].every(c => {drawn_js});
    }}""", timeout=60_000)
    page.wait_for_timeout(1500)        # the scroll into view waits for both charts
    for chart in view.locator(".js-plotly-plot").all():
        box = chart.bounding_box()
        assert box["y"] >= 0 and box["y"] + box["height"] * 0.6 <= size[1], box
    return view.inner_text()
