"""The debugger's editor and waits in a real browser: the projector layout at 1280x720,
the Ace editor offline (Tab indents, Ctrl+Enter runs, the error line marked), and Cancel.

Saves screenshots to artifacts/."""
import pytest

from browser_util import WAIT_MS, assert_no_exception, screenshot_path, streamlit_server, sync_api, CHROMIUM, ARGS

from tapeviz.state import share

pytestmark = pytest.mark.slow   # a Streamlit server driven in Chromium

ENDLESS = "import tensorflow as tf\n\nx = tf.constant(1.0)\nwhile True:\n    x = x + 1.0\n"


@pytest.fixture(scope="module")
def server():
    with streamlit_server() as url:
        yield url


@pytest.fixture
def page_at():
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)

        def make(width, height):
            return browser.new_page(viewport={"width": width, "height": height})
        try:
            yield make
        finally:
            browser.close()


def wait_for_graph(page):
    try:
        page.wait_for_selector(".js-plotly-plot .scatterlayer, .js-plotly-plot canvas", timeout=WAIT_MS)
    except Exception:
        page.screenshot(path=screenshot_path("editor_no_graph.png"))
        raise
    page.wait_for_timeout(1500)


def test_projector_1280x720_shows_editor_and_graph_offline(server, page_at):
    page = page_at(1280, 720)
    elsewhere = []
    page.on("request", lambda r: None if r.url.startswith((server, "data:", "blob:", "about:"))
            else elsewhere.append(r.url))
    page.goto(f"{server}/?example=higher_order")
    wait_for_graph(page)
    frame = page.frame_locator("iframe[title*='code_editor']")
    frame.locator("#REACT_ACE_EDITOR").wait_for(timeout=WAIT_MS)
    editor_box = page.locator("iframe[title*='code_editor']").bounding_box()
    graph_box = page.locator(".js-plotly-plot").first.bounding_box()
    page.screenshot(path=screenshot_path("projector_higher_order_1280x720.png"))
    assert editor_box["y"] + 100 < 720 and graph_box["y"] + 100 < 720, (editor_box, graph_box)
    assert graph_box["x"] > editor_box["x"] + editor_box["width"] - 5     # side by side
    # Nothing from elsewhere: not the editor's code, nor a web font, nor the page's icon
    assert not elsewhere, f"requests off the app: {elsewhere}"
    # Only the code is in the editor; the docstring's explanation is text beside it.
    code = frame.locator("#REACT_ACE_EDITOR .ace_content").inner_text()
    assert "x = tf.Variable(1.0)" in code and "Second derivatives" not in code
    assert frame.locator("#REACT_ACE_EDITOR .ace_gutter-cell").first.inner_text().strip() == "1"
    assert_no_exception(page)


def test_tab_indents_and_ctrl_enter_runs_with_the_error_line_marked(server, page_at):
    page = page_at(1280, 720)
    page.goto(f"{server}/?example=higher_order")
    wait_for_graph(page)
    frame = page.frame_locator("iframe[title*='code_editor']")
    frame.locator("#REACT_ACE_EDITOR .ace_content").click()
    page.keyboard.press("Control+End")
    page.keyboard.press("Enter")
    page.keyboard.press("Tab")          # indents in the editor, not a jump to the next control
    page.keyboard.type("oops = tf.Var", delay=50)
    # At once, as a user would: sooner than the component's own copy of the text was
    # updated (250 ms by default), the error line was never drawn (editor.ACE_PROPS)
    page.keyboard.press("Control+Enter")
    page.wait_for_selector("text=IndentationError", timeout=WAIT_MS)
    frame.locator(".tv-error-line").wait_for(timeout=30_000)
    # The run took the text as typed, and the editor still shows it
    assert "    oops = tf.Var" in frame.locator("#REACT_ACE_EDITOR .ace_content").inner_text()
    # No completion list was left open over the code (it opened while typing "tf.Var",
    # and Ctrl+Enter did not close it): completion waits for Ctrl+Space
    popup = frame.locator(".ace_autocomplete")
    assert popup.count() == 0 or not popup.first.is_visible()
    gutter = frame.locator("#REACT_ACE_EDITOR .ace_gutter-cell.ace_error")
    assert gutter.count() == 1
    # The error's line number sits beside the marked line, not half a line off it
    marked, number = frame.locator(".tv-error-line").bounding_box(), gutter.bounding_box()
    assert abs(marked["y"] - number["y"]) < 3, (marked, number)
    page.screenshot(path=screenshot_path("editor_error_line.png"))
    assert_no_exception(page)


def test_cancel_ends_the_run_and_leaves_the_page_clean(server, page_at):
    page = page_at(1024, 768)
    page.goto(f"{server}/?code={share.encode(ENDLESS)}")
    page.wait_for_selector("text=Running your program", timeout=WAIT_MS)
    page.get_by_role("button", name="Cancel").click()
    try:
        page.wait_for_selector("text=Cancelled after", timeout=30_000)
    except Exception:
        # Known flake (see the issue 12 notes): now and then the click's script run is lost
        # while the page polls the run; a second click is what a user would do.
        print("RETRY: Cancel did not take; pressing it again")
        page.get_by_role("button", name="Cancel").click()
        page.wait_for_selector("text=Cancelled after", timeout=60_000)
    page.wait_for_timeout(2000)
    assert page.locator("text=Running your program").count() == 0
    assert page.get_by_role("button", name="Cancel").count() == 0
    assert_no_exception(page)
