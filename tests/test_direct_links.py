"""A class is sent a page's link: each page, opened first on a fresh server by its own
address, shows the app's menu and title as when reached from the menu (tapeviz/ui/frame.py's
require makes a pages/ script's first run go through app.py)."""
import urllib.parse

import pytest

from browser_util import WAIT_MS, assert_no_exception, browser_page, streamlit_server

pytestmark = pytest.mark.slow   # a fresh Streamlit server per address, driven in Chromium

MENU = ("Tape debugger", "Train MNIST")


# the debugger is the default page, at the bare address; Train MNIST is at /train
@pytest.mark.parametrize("path, shown", [("", ".js-plotly-plot"), ("train", "button:has-text('Start')")])
def test_a_direct_link_opens_its_page_with_the_menu_on_a_fresh_server(path, shown):
    with streamlit_server() as url, browser_page() as page:
        page.goto(f"{url}/{path}")      # the server's first session, at this page's address
        page.wait_for_selector(shown, timeout=WAIT_MS)      # this page, not another
        for name in MENU:
            page.get_by_role("link", name=name, exact=True).wait_for(timeout=60_000)
        page.wait_for_function("document.title === 'tapeviz'", timeout=60_000)
        assert urllib.parse.urlparse(page.url).path.strip("/") == path     # still there
        assert_no_exception(page)
