"""The debugger's view switches in Chromium: each shows the state the graph is drawn with,
its first click changes the picture, and Backward ops stays on the call on screen. (The
browser keeps its own copy of a widget's value: AppTest cannot see the two disagree.)"""
import re

import pytest

from browser_util import WAIT_MS, SETTLED, assert_no_exception, browser_page, settle, streamlit_server
from plain_runs import program
from tapeviz.state import share

pytestmark = pytest.mark.slow   # a Streamlit server driven in Chromium


@pytest.fixture(scope="module")
def url():
    with streamlit_server() as address:
        yield address


def opened(page, url, name):
    page.set_viewport_size({"width": 1280, "height": 720})
    page.goto(f"{url}/?code={share.encode(program(name))}")
    settle(page, WAIT_MS)


def showing(page):
    return page.locator("[data-testid=stPopover] button", has_text="Showing").first


def switch(page, label):
    showing(page).click()
    box = page.locator("[data-testid=stPopoverBody] [data-testid=stCheckbox]", has_text=label)
    box.wait_for(timeout=10_000)
    return box


def click_and_settle(page, box):
    box.click()
    page.wait_for_timeout(500)
    page.wait_for_function(SETTLED, timeout=WAIT_MS)
    page.wait_for_timeout(1000)
    page.keyboard.press("Escape")


def ops_drawn(page) -> int:
    said = page.get_by_text(re.compile(r"Step through the \d+ ops drawn")).inner_text()
    return int(re.search(r"(\d+) ops", said).group(1))


def test_fold_loops_is_on_while_loops_are_folded_and_its_first_click_unfolds(url):
    with browser_page() as page:
        opened(page, url, "folded_loop")
        folded = ops_drawn(page)
        box = switch(page, "Fold loops")
        assert box.locator("input").is_checked(), "loops are folded: the switch must say so"
        click_and_settle(page, box)
        assert ops_drawn(page) == 24 > folded      # 12 steps of * and +, each drawn
        assert not switch(page, "Fold loops").locator("input").is_checked()
        assert_no_exception(page)


def test_backward_ops_stays_on_the_call_on_screen(url):
    with browser_page() as page:
        opened(page, url, "unwatched_second_tape")
        assert "line 11" in showing(page).inner_text()       # the None callout's call
        box = switch(page, "Backward ops")
        assert not box.locator("input").is_checked()
        click_and_settle(page, box)
        assert "line 11" in showing(page).inner_text(), showing(page).inner_text()
        assert switch(page, "Backward ops").locator("input").is_checked()
        page.keyboard.press("Escape")
        assert page.get_by_text(re.compile("tape2 recorded")).count()     # the sentence is line 11's
        assert_no_exception(page)
