"""`tapeviz view RUN.json` in a real browser: the app opens on a recording made from a
multi-file project, a picked node shows its own file's source, and "Open a recording"
refuses a file that is not one with a clear message."""
import json
import os
import subprocess
import sys

import pytest

from browser_util import ROOT, WAIT_MS, assert_no_exception, browser_page, screenshot_path, served, settle
from user_project import line_of, write_project

pytestmark = pytest.mark.slow   # a Streamlit server driven in Chromium

SIZES = [(1600, 1000), (1280, 720), (1024, 768)]


@pytest.fixture(scope="module")
def recording(tmp_path_factory):
    folder = write_project(tmp_path_factory.mktemp("project"))
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    result = subprocess.run([sys.executable, "-m", "tapeviz", "record", "main.py", "-o", "run.json",
                             "--timeout", "120", "--", "--lr", "0.05", "--steps", "2"],
                            cwd=folder, env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    return folder, json.loads((folder / "run.json").read_text())


@pytest.fixture(scope="module")
def viewer(recording):
    folder, _ = recording
    # Started from the project's folder, as a user would: the command finds the app itself.
    with served(lambda port: [sys.executable, "-m", "tapeviz", "view", "run.json", "--port", str(port),
                              "--headless"], cwd=folder, env={"PYTHONPATH": str(ROOT)}) as url:
        yield url


def pick_node(page, text):
    box = page.locator("[data-testid='stSelectbox']").filter(has_text="Node")
    box.locator("input").click()
    page.keyboard.type(text)
    page.keyboard.press("Enter")


def test_view_opens_the_recording_and_shows_each_nodes_own_file(viewer, recording):
    folder, data = recording
    with browser_page() as page:
        page.goto(viewer)
        # drawn, then drawn again with the run view once the browser reported Plotly's chart
        settle(page, WAIT_MS)
        text = page.inner_text("body")
        assert "Showing the recording run.json" in text and "main.py" in text
        assert "--lr 0.05 --steps 2" in text
        assert "step 1 loss" in text                    # the program's printed output
        assert_no_exception(page)
        # Pick the Tanh op: it ran in trainer/model.py, and its source comes from that file.
        pick_node(page, "Tanh")
        line = line_of(folder, "trainer/model.py", "tf.tanh")
        page.wait_for_selector(f"text=line {line} of trainer/model.py", timeout=30_000)
        # the excerpt from that file (polled: the page may be redrawing it)
        page.wait_for_function("() => document.body.innerText.includes('return tf.tanh(z + self.b)')",
                               timeout=30_000)
        for width, height in SIZES:
            page.set_viewport_size({"width": width, "height": height})
            page.get_by_text(f"line {line} of trainer/model.py").scroll_into_view_if_needed()
            page.wait_for_timeout(800)
            page.screenshot(path=screenshot_path(f"view_{width}x{height}.png"))


def test_open_a_recording_refuses_other_files_and_opens_recordings(viewer, recording, tmp_path):
    folder, data = recording
    notes = tmp_path / "notes.json"
    notes.write_text(json.dumps({"loss": [1, 2, 3]}))
    with browser_page() as page:
        page.goto(viewer)
        page.wait_for_selector(".js-plotly-plot", timeout=WAIT_MS)
        page.get_by_text("Open a recording").click()
        page.locator("[data-testid='stFileUploader'] input[type=file]").set_input_files(str(notes))
        page.wait_for_selector("text=notes.json is JSON but not a tapeviz recording", timeout=30_000)
        page.screenshot(path=screenshot_path("view_not_a_recording.png"), full_page=True)
        # A real recording (this one, saved under another name) opens in its place.
        again = tmp_path / "again.json"
        again.write_text((folder / "run.json").read_text())
        page.locator("[data-testid='stFileUploader'] input[type=file]").set_input_files(str(again))
        page.wait_for_selector("text=Showing the recording again.json", timeout=30_000)
        assert_no_exception(page)
