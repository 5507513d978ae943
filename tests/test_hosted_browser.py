"""Hosted mode in a real browser against a real Streamlit server: a debugger run belongs to
its tab. Closing the tab ends its running program and drops its queued one, long before
their time limit; and a crafted `?example=` shows as inert text."""
import os
import time

import pytest

from browser_util import assert_no_exception, browser_page, screenshot_path, server_pid, streamlit_server
from tapeviz.state import share
from tapeviz.server import sandbox

SANDBOXED, WHY_NOT = sandbox.probe()
pytestmark = [pytest.mark.slow,   # hosted Streamlit servers driven in Chromium
              pytest.mark.skipif(not SANDBOXED, reason=f"no usable bwrap: {WHY_NOT}")]
SLEEPER = "import time\nprint('started')\ntime.sleep(100)\n"


def workers_of(pid: int) -> list:
    """Workers running a job (python -m tapeviz.worker, dropped to a worker's own uid)
    descended from the server `pid`. The fork server and the root helpers of each forked
    job share the command line but stay root, and outlive no job of their own."""
    parents, commands, uids = {}, {}, {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = open(f"/proc/{entry}/stat").read()
                parents[int(entry)] = int(stat.rsplit(")", 1)[1].split()[1])
                commands[int(entry)] = open(f"/proc/{entry}/cmdline", "rb").read()
                status = open(f"/proc/{entry}/status").read()
                uids[int(entry)] = int(status.split("\nUid:", 1)[1].split()[0])
            except (OSError, ValueError, IndexError):
                continue
    found = []
    for child, command in commands.items():
        if (b"tapeviz.worker" not in command or b"bwrap" in command.split(b"\0")[0]
                or uids.get(child, 0) == 0):
            continue
        node, seen = child, 0
        while node in parents and node > 1 and seen < 64:
            node, seen = parents[node], seen + 1
            if node == pid:
                found.append(child)
                break
    return found


def wait_for(condition, seconds: float):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.25)
    return False


def test_closing_the_tab_cancels_its_running_and_queued_runs():
    # a sleeping program would give its slot way (sleepers.py): here it holds it, so that the
    # second tab's run waits in line and both runs are live when the tab closes
    env = {"TAPEVIZ_MODE": "hosted", "TAPEVIZ_WARM": "0", "TAPEVIZ_WORKERS": "1",
           "TAPEVIZ_TIMEOUT_S": "120", "TAPEVIZ_SLEEPERS": "0"}
    with streamlit_server(env) as url, browser_page() as first:
        pid = server_pid(url)
        assert pid is not None
        link = share.link(url + "/", code=SLEEPER)
        first.goto(link)
        assert wait_for(lambda: len(workers_of(pid)) == 1, 120), "the run starts a worker"
        first.get_by_text("Running your program in a worker").wait_for(timeout=60_000)
        second = first.context.browser.new_page(viewport=first.viewport_size)
        second.goto(link)
        second.get_by_text("Waiting for a free worker").wait_for(timeout=60_000)
        second.screenshot(path=screenshot_path("hosted-queued.png"))
        second.close()                           # the queued run's tab
        first.close()                            # the running run's tab
        # The program sleeps 100 s; its tab's session ends and the run with it.
        assert wait_for(lambda: not workers_of(pid), 30), workers_of(pid)
        time.sleep(5)                            # the queued run would start here
        assert not workers_of(pid), "the closed tab's queued run started"


def test_a_crafted_example_link_is_inert_text():
    with streamlit_server({"TAPEVIZ_MODE": "hosted"}) as url, browser_page() as page:
        page.goto(url + "/?example=x%5D(http://evil.invalid)%20!%5Bi%5D(http://evil.invalid/i.png)"
                  "%20%3Cimg%20src=x%3E")
        page.get_by_text("There is no example called").wait_for(timeout=60_000)
        # The header says the mode in its one line; its popover holds the sentence
        page.get_by_role("button", name="Hosted: isolated").click()
        page.get_by_text("Programs run isolated").wait_for(timeout=60_000)
        warning = page.get_by_text("There is no example called").inner_text()
        assert "evil.invalid" in warning
        assert page.locator("a[href*='evil.invalid']").count() == 0
        assert page.locator("img[src*='evil.invalid']").count() == 0
        assert_no_exception(page)
        page.screenshot(path=screenshot_path("hosted-crafted-link.png"))


def test_the_share_link_cap_is_what_the_server_accepts():
    """The reference for share.MAX_LINK: the real server answers a link at the cap, and
    refuses (HTTP 400, before the app could speak) one of the size the cap keeps out."""
    import urllib.error
    import urllib.request
    with streamlit_server({"TAPEVIZ_MODE": "hosted"}) as url:
        def status(length):
            base = url + "/?code="
            try:
                return urllib.request.urlopen(base + "A" * (length - len(base)), timeout=30).status
            except urllib.error.HTTPError as e:
                return e.code
        assert status(share.MAX_LINK) == 200
        assert status(128 * 1024) == 400
