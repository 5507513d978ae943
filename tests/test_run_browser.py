"""The debugger's moves that take the reader somewhere, in Chromium: a click on a step of
the run view ("The run, step by step") opens that step's graph, and a callout's "Show it"
scrolls its node to the middle of the screen."""
import pytest

from browser_util import WAIT_MS, assert_no_exception, browser_page, screenshot_path, streamlit_server

pytestmark = pytest.mark.slow   # a Streamlit server driven in Chromium

LOOP = """import tensorflow as tf
w = tf.Variable(2.0)
for step in range(5):
    with tf.GradientTape() as tape:
        loss = (w * 3.0 - 1.0) ** 2
    g = tape.gradient(loss, w)
    w.assign_sub(0.01 * g)
"""

# A point of a trace, where the browser drew it: the chart's own axes map data to pixels.
POINT = """([gd, name, n]) => { const L = gd._fullLayout, r = gd.getBoundingClientRect();
    const t = gd._fullData.find(t => t.name === name), i = Array.from(t.x).indexOf(n);
    const xa = L[t.xaxis.replace('x', 'xaxis')], ya = L[t.yaxis.replace('y', 'yaxis')];
    return {x: r.left + xa._offset + xa.l2p(t.x[i]), y: r.top + ya._offset + ya.l2p(t.y[i])}; }"""
# The picked node's ring, where it is on screen.
RING = """gd => { const t = gd._fullData.find(t => t.name === 'selected');
    if (!t || !t.x || !t.x.length) return null;
    const L = gd._fullLayout, r = gd.getBoundingClientRect();
    return r.top + L.yaxis._offset + L.yaxis.l2p(t.y[0]); }"""


def reference_grads(steps: int) -> list:
    """d loss / d w at each step, as plain TensorFlow runs the loop."""
    import tensorflow as tf
    w, out = tf.Variable(2.0), []
    for _ in range(steps):
        with tf.GradientTape() as tape:
            loss = (w * 3.0 - 1.0) ** 2
        g = tape.gradient(loss, w)
        out.append(float(g.numpy()))
        w.assign_sub(0.01 * g)
    return out


@pytest.fixture(scope="module")
def server():
    with streamlit_server() as url:
        yield url


def showing(page) -> str:
    return page.locator("[data-testid='stPopover'] button", has_text="Showing").first.inner_text()


def test_a_click_on_a_step_of_the_run_opens_that_steps_graph(server):
    from tapeviz.state import share
    with browser_page() as page:
        page.goto(f"{server}/?code={share.encode(LOOP)}")
        page.wait_for_selector(".js-plotly-plot .scatterlayer", timeout=WAIT_MS)
        run = page.locator(".js-plotly-plot", has_text="the run").first
        run.wait_for(timeout=WAIT_MS)
        assert "step 5 of 5" in showing(page)           # a loop opens on its newest step
        # the run's x is the step number, 1 to 5
        xs = run.evaluate("gd => gd._fullData.map(t => Array.from(t.x))")
        assert xs and all(x == [1, 2, 3, 4, 5] for x in xs), xs
        run.scroll_into_view_if_needed()
        page.wait_for_timeout(800)
        point = page.evaluate(POINT, [run.element_handle(), "loss per step", 3])
        page.mouse.move(point["x"], point["y"])
        page.mouse.click(point["x"], point["y"])
        page.wait_for_function("() => Array.from(document.querySelectorAll(\"[data-testid='stPopover'] button\"))"
                               ".some(b => b.innerText.includes('step 3 of 5'))", timeout=60_000)
        page.wait_for_timeout(1500)
        # the graph drawn is step 3's: w's gradient is the one plain TensorFlow gave then
        grads = reference_grads(5)
        labels = page.locator(".js-plotly-plot").first.locator(".textpoint text").evaluate_all(
            "els => els.map(e => e.textContent)")
        # a float32 gradient in its own shortest digits, as NumPy prints it
        import numpy as np
        assert any(t.startswith("w = ") and t.endswith(f"grad {str(np.float32(grads[2]))}") for t in labels), (grads, labels)
        assert not any(t.endswith(f"grad {str(np.float32(grads[4]))}") for t in labels), labels
        assert_no_exception(page)
        page.screenshot(path=screenshot_path("run_step_clicked.png"))


UNWATCHED = """import tensorflow as tf
x = tf.convert_to_tensor(10.)
with tf.GradientTape() as tape:
    y = x * x
print(tape.gradient(y, x))
"""
# The scrolling pane the page lives in, scrolled to its end, as a reader reading on does.
TO_THE_END = """() => { let pane = document.querySelector('.js-plotly-plot').parentElement;
    while (pane && pane.scrollHeight <= pane.clientHeight + 1) pane = pane.parentElement;
    pane.scrollTop = pane.scrollHeight; }"""


def test_show_it_scrolls_its_node_into_the_middle_of_the_screen(server):
    from tapeviz.state import share
    with browser_page() as page:
        page.set_viewport_size({"width": 1024, "height": 520})
        page.goto(f"{server}/?code={share.encode(UNWATCHED)}")
        page.wait_for_selector(".js-plotly-plot .scatterlayer", timeout=WAIT_MS)
        page.wait_for_timeout(1500)
        page.evaluate(TO_THE_END)
        page.wait_for_timeout(500)
        chart = page.locator(".js-plotly-plot").first
        assert chart.bounding_box()["y"] + chart.bounding_box()["height"] < 0    # scrolled past it
        # The button as the reader presses it, without the browser's help in finding it
        page.get_by_role("button", name="Show it").first.evaluate("b => b.click()")
        page.wait_for_function("() => { const gd = document.querySelector('.js-plotly-plot');"
                               " return gd && gd._fullData.some(t => t.name === 'selected'); }", timeout=60_000)
        page.wait_for_timeout(2000)
        ring = chart.evaluate(RING)
        assert ring is not None and 0 < ring < 520, ring
        assert_no_exception(page)
        page.screenshot(path=screenshot_path("show_it_scrolled.png"))
