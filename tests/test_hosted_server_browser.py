"""The server's own walls in a real browser against a real hosted Streamlit server (sandbox
on): a forged recording with a million inputs, from a worker and as an uploaded file, a
100,000-deep JSON, very long names, and a 400 MB-of-zeros npz on the training page. Each
leaves the server process within +600 MiB of its peak memory (VmHWM) and the page answering
with a plain message."""
import json
import os

import pytest

from browser_util import (assert_no_exception, browser_page, chromium, screenshot_path, server_pid, settle,
                          streamlit_server)
from tapeviz.state import share
from tapeviz.server import sandbox
from npz_bombs import zipped_zeros_npz

SANDBOXED, WHY_NOT = sandbox.probe()
pytestmark = [pytest.mark.slow,   # a hosted server, its sandboxed workers
              pytest.mark.skipif(not SANDBOXED, reason=f"no usable bwrap: {WHY_NOT}")]
ENV = {"TAPEVIZ_MODE": "hosted", "TAPEVIZ_WARM": "1", "TAPEVIZ_WORKERS": "1",
       "TAPEVIZ_TIMEOUT_S": "60"}
SERVER_MIB = 600
WAIT_MS = 180_000
UPLOADER = "[data-testid='stFileUploader'] input[type=file]"

FORGE = """import linecache, sys
SOURCE = ''.join(linecache.cache[__file__][2])
frame = sys._getframe()
while 'channel' not in frame.f_locals:
    frame = frame.f_back
frame.f_locals['channel'].send({"type": "recording", "recording": {
    "schema": "tapeviz.recording/1", "source": SOURCE, "tensors": [], "tapes": [],
    "ops": [{"id": 0, "type": "AddN", "inputs": list(range(1, 1_000_001)), "outputs": [0],
             "line": 1, "scope": None, "tapes": [], "phase": "forward"}]}})
"""


def million_inputs() -> bytes:
    return json.dumps({"schema": "tapeviz.recording/1", "source": "x = 1\n", "tensors": [],
                       "tapes": [], "ops": [{"id": 0, "type": "AddN", "inputs": list(range(1, 1_000_001)),
                                             "outputs": [0], "line": 1, "scope": None, "tapes": [],
                                             "phase": "forward"}]}).encode()


def long_names() -> bytes:
    tensors = [{"id": i, "name": "n" * 1000, "shape": [], "dtype": "float32", "kind": "constant",
                "producer": None} for i in range(15_000)]
    return json.dumps({"schema": "tapeviz.recording/1", "source": "x = 1\n", "ops": [],
                       "tensors": tensors, "tapes": []}).encode()


UPLOADS = {
    "fan-in.json": (million_inputs, "inputs and outputs together, over the bound"),
    "deep.json": (lambda: ("[" * 100_000 + "]" * 100_000).encode(), "nested deeper than any recording"),
    "names.json": (long_names, "characters together, over the bound"),
}


@pytest.fixture(scope="module")
def server():
    with streamlit_server(ENV) as url:
        yield url, server_pid(url)


@pytest.fixture(scope="module")
def browser():
    """One Chromium for the module: each test's page is a fresh context of it."""
    with chromium() as browser:
        yield browser


def peak_mib(pid: int) -> float:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    raise AssertionError("no VmHWM")


def within(pid: int, before: float, what: str):
    grew = peak_mib(pid) - before
    print(f"{what}: the server's peak memory +{grew:.0f} MiB")
    assert grew < SERVER_MIB, (what, grew)


@pytest.mark.parametrize("name", list(UPLOADS))
def test_a_hostile_recording_upload_is_a_plain_message(server, browser, name, tmp_path):
    url, pid = server
    make, words = UPLOADS[name]
    path = tmp_path / name
    path.write_bytes(make())
    with browser_page(browser) as page:
        page.goto(url)
        settle(page, WAIT_MS)      # an upload during the page's own first rerun can be lost
        page.get_by_text("Open a recording").wait_for(timeout=WAIT_MS)
        before = peak_mib(pid)
        page.get_by_text("Open a recording").click()
        page.locator(UPLOADER).set_input_files(str(path))
        page.get_by_text(words).wait_for(timeout=WAIT_MS)
        page.screenshot(path=screenshot_path(f"hosted-upload-{name}.png"), full_page=True)
        assert_no_exception(page)
        within(pid, before, f"upload {name} ({path.stat().st_size / 2**20:.1f} MiB)")


def test_a_forged_million_input_recording_from_a_worker_is_a_plain_message(server, browser):
    url, pid = server
    with browser_page(browser) as page:
        page.goto(url)
        settle(page, WAIT_MS)      # an upload during the page's own first rerun can be lost
        page.get_by_text("Open a recording").wait_for(timeout=WAIT_MS)
        before = peak_mib(pid)
        page.goto(share.link(url + "/", code=FORGE))
        page.get_by_text("inputs and outputs together, over the bound").first.wait_for(timeout=WAIT_MS)
        page.screenshot(path=screenshot_path("hosted-forged-recording.png"), full_page=True)
        assert_no_exception(page)
        within(pid, before, "a forged million-input recording from a worker")


def test_a_400_mb_of_zeros_npz_is_refused_on_the_training_page(server, browser, tmp_path):
    url, pid = server
    path = tmp_path / "mnist.npz"
    path.write_bytes(zipped_zeros_npz(400 * 2**20))
    with browser_page(browser) as page:
        page.goto(url)
        page.get_by_role("link", name="Train MNIST").click()
        page.get_by_text("Where the digits come from").wait_for(timeout=WAIT_MS)
        before = peak_mib(pid)
        page.get_by_text("Where the digits come from").click()
        page.locator(UPLOADER).set_input_files(str(path))
        page.get_by_text("it would unpack to 400 MiB").wait_for(timeout=WAIT_MS)
        page.screenshot(path=screenshot_path("hosted-npz-bomb.png"), full_page=True)
        assert_no_exception(page)
        within(pid, before, f"a 400 MB-of-zeros npz ({path.stat().st_size / 2**10:.0f} KiB)")


def inotify_watches(pid: int) -> int:
    count = 0
    for fd in os.listdir(f"/proc/{pid}/fdinfo"):
        try:
            with open(f"/proc/{pid}/fdinfo/{fd}") as f:
                count += sum(1 for line in f if line.startswith("inotify wd:"))
        except OSError:
            continue
    return count


def test_hosted_mode_turns_the_file_watcher_off_for_new_sessions(browser):
    """Started without the Dockerfile's --server.fileWatcherType=none: the sessions after
    the first watch no files. The reference: the same server in local mode watches files."""
    counts = {}
    for mode in ("local", "hosted"):
        with streamlit_server(dict(ENV, TAPEVIZ_MODE=mode, TAPEVIZ_WARM="0")) as url:
            pid = server_pid(url)
            with browser_page(browser) as page:
                page.goto(url)
                page.get_by_text("Open a recording").wait_for(timeout=WAIT_MS)
                first = inotify_watches(pid)
            # the first session ended with its page, and its watches
            with browser_page(browser) as second:
                second.goto(url)
                second.get_by_text("Open a recording").wait_for(timeout=WAIT_MS)
                second.wait_for_timeout(2000)
                counts[mode] = (first, inotify_watches(pid))
    print("inotify watches (first session, a later one):", counts)
    assert counts["local"][1] > 0
    assert counts["hosted"][1] == 0
