"""The debugger's "Compare with…" in Chromium: opened on a recording, choosing the pair (two
steps of its run, or an opened recording) shows both graphs with the first divergence called
out and the sentence over them, at 1600x1000 and 1280x720, with no other click."""
import sys

import pytest

from browser_util import (ROOT, WAIT_MS, assert_no_exception, browser_page, compare_view_on_screen,
                          screenshot_path, served, settle)
from compare_runs import FLOWING, NAN_LOOP, STOPPED, line_of, record

pytestmark = pytest.mark.slow   # a Streamlit server driven in Chromium, recordings by the worker

SIZES = [(1600, 1000), (1280, 720)]


@pytest.fixture(scope="module")
def recordings(tmp_path_factory):
    d = tmp_path_factory.mktemp("compare_pages")
    return {"nan": record(d, "nan_loop", NAN_LOOP), "stopped": record(d, "stopped", STOPPED),
            "flowing": record(d, "flowing", FLOWING)}


def viewer(path):
    return served(lambda port: [sys.executable, "-m", "tapeviz", "view", str(path), "--port", str(port),
                                "--headless"], env={"PYTHONPATH": str(ROOT)})


def choose(page, choice):
    settle(page, WAIT_MS)
    expander = page.locator("[data-testid='stExpander']", has_text="Compare with…")
    expander.scroll_into_view_if_needed()
    page.wait_for_timeout(1000)
    expander.locator("summary").click()
    box = page.locator("[data-testid='stSelectbox']", has_text="Compare this run with")
    box.wait_for(timeout=30_000)
    page.wait_for_timeout(800)
    box.click()
    page.get_by_role("option", name=choice).click()
    page.wait_for_timeout(1500)       # the choice's rerun, before anything else is done


def both_charts_in_view(page, size):
    """The compare view's two charts, drawn, each with its first divergence ring, on screen."""
    return compare_view_on_screen(page, size, "(c._fullData || []).some(t => t.name === "
                                  "'first divergence' && t.x && t.x.length)")


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_two_steps_of_a_run_that_turns_nan(recordings, size):
    with viewer(recordings["nan"]) as url, browser_page() as page:
        page.set_viewport_size({"width": size[0], "height": size[1]})
        page.goto(url)
        choose(page, "another step of this run")
        text = both_charts_in_view(page, size)
        page.screenshot(path=screenshot_path(f"compare_steps_{size[0]}x{size[1]}.png"))
        assert f"step 1 turns NaN at line {line_of(NAN_LOOP, 'tf.math.log')}" in text
        assert "step 0" in text and "step 1" in text
        assert_no_exception(page)


def test_an_opened_recording_after_removing_a_stop_gradient(recordings):
    size = SIZES[0]
    with viewer(recordings["stopped"]) as url, browser_page() as page:
        page.goto(url)
        choose(page, "an opened recording")
        uploader = page.locator("[data-testid='stFileUploader']", has_text="to compare with")
        uploader.wait_for(timeout=30_000)
        uploader.locator("input[type=file]").set_input_files(str(recordings["flowing"]))
        text = both_charts_in_view(page, size)
        page.screenshot(path=screenshot_path("compare_opened_1600x1000.png"))
        assert f"removed tf.stop_gradient at line {line_of(STOPPED, 'tf.stop_gradient')}" in text.replace("`", "")
        assert "StopGradient" in text
        assert_no_exception(page)
