"""The PyTorch twin example in Chromium: `?example=pytorch_vs_tape` opens with the tape's
graph and PyTorch's side by side, matched op by op, and the sentence over them says the
gradients (x 2, w 10, b 1) are the same on both, with no click; where PyTorch is not
installed, the page says how to get it and still teaches the tape."""
import importlib.util

import pytest

from browser_util import (WAIT_MS, assert_no_exception, browser_page, compare_view_on_screen, screenshot_path,
                          settle, streamlit_server)

pytestmark = pytest.mark.slow   # a Streamlit server and its workers, driven in Chromium

SIZES = [(1600, 1000), (1280, 720)]
LINK = "/?example=pytorch_vs_tape"
HAS_TORCH = importlib.util.find_spec("torch") is not None


def both_charts_drawn(page, size) -> str:
    return compare_view_on_screen(page, size, "(c._fullData || []).length > 0", timeout_ms=120_000)


@pytest.fixture(scope="module")
def app():
    with streamlit_server(env={"TAPEVIZ_CACHE_DIR": "off"}) as url:
        yield url


@pytest.mark.skipif(not HAS_TORCH, reason="PyTorch is not installed: pip install .[torch]")
@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_the_twin_opens_beside_the_tape_with_the_same_gradients(app, size):
    with browser_page() as page:
        page.set_viewport_size({"width": size[0], "height": size[1]})
        page.goto(app + LINK)
        text = both_charts_drawn(page, size)
        page.screenshot(path=screenshot_path(f"twin_{size[0]}x{size[1]}.png"))
        assert "TensorFlow's tape" in text and "PyTorch's autograd" in text
        assert "match within rtol" in text
        for name, grad in (("x", "2.0"), ("w", "10.0"), ("b", "1.0")):
            assert f"{name}'s gradient {grad}" in text
        assert "2 match, 0 differ" in text
        # each side's graph names its ops in its own framework's words
        charts = page.locator(".st-key-compare_view .js-plotly-plot").all()
        assert "*" in charts[0].inner_text() and "mul" in charts[1].inner_text()
        assert_no_exception(page)


def test_without_pytorch_the_page_says_how_to_get_it(tmp_path):
    # a `torch` that fails to import as a missing one does, first on the worker's path
    fake = tmp_path / "torch"
    fake.mkdir()
    (fake / "__init__.py").write_text(
        "raise ModuleNotFoundError(\"No module named 'torch'\", name='torch')\n")
    with streamlit_server(env={"TAPEVIZ_CACHE_DIR": "off", "PYTHONPATH": str(tmp_path)}) as url, \
            browser_page() as page:
        page.goto(url + LINK)
        page.get_by_text("pip install .[torch]").first.wait_for(timeout=120_000)
        settle(page, WAIT_MS)
        page.screenshot(path=screenshot_path("twin_without_torch.png"))
        body = page.inner_text("body")
        assert "PyTorch is not installed" in body
        assert page.locator(".st-key-compare_view").count() == 0
        # the tape's own lesson is on the page: its graph and its gradients
        assert "grad 10.0" in body and "grad 2.0" in body
        assert_no_exception(page)
