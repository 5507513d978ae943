"""The app in a real browser: `streamlit run app.py` driven by Playwright through Debian's chromium.

Saves screenshots to artifacts/ (docs/, which the README shows, with TAPEVIZ_UPDATE_DOCS=1).
"""
import re

import pytest

from browser_util import (WAIT_MS, assert_no_exception, browser_page, screenshot_path,
                          streamlit_server)
from plain_runs import plain
from tapeviz import examples

pytestmark = pytest.mark.slow   # a Streamlit server driven in Chromium


@pytest.fixture(scope="module")
def server():
    with streamlit_server() as url:
        yield url


@pytest.fixture(scope="module")
def page():
    with browser_page() as page:
        yield page


def open_example(page, server, name):
    page.goto(f"{server}/?example={name}")
    page.wait_for_selector(".js-plotly-plot .scatterlayer, .js-plotly-plot canvas", timeout=WAIT_MS)
    page.wait_for_function("document.querySelectorAll('.js-plotly-plot').length > 0")
    page.wait_for_timeout(1500)     # let plotly finish laying out the labels before a screenshot


def crossed_labels(page, text) -> list:
    """The chart's labels holding `text` that a drawn edge passes through, measured by the
    browser: points every 2 px along the edges' SVG paths (plotly draws one per edge) against
    each label's box."""
    return page.evaluate("""text => {
        const labels = Array.from(document.querySelectorAll('.js-plotly-plot .textpoint text'))
            .filter(t => t.textContent.includes(text)).map(t => [t.textContent, t.getBoundingClientRect()]);
        const points = [], out = [];
        for (const path of document.querySelectorAll('.js-plotly-plot .scatterlayer .trace .js-line')) {
            const m = path.getScreenCTM();
            for (let at = 0; at <= path.getTotalLength(); at += 2) {
                const p = path.getPointAtLength(at);
                points.push([m.a * p.x + m.c * p.y + m.e, m.b * p.x + m.d * p.y + m.f]);
            }
        }
        for (const [name, r] of labels)
            if (points.some(([x, y]) => x > r.left && x < r.right && y > r.top && y < r.bottom)) out.push(name);
        return out; }""", text)


def test_higher_order_in_the_browser(server, page):
    open_example(page, server, "higher_order")
    text = page.inner_text("body")
    assert "3.0" in text and "6.0" in text
    # the nested-tapes lesson's labels, as Chromium drew them on a projector's 1280 px and
    # on this window: no arrow through them
    for width, height in ((1280, 720), (1600, 1000)):
        page.set_viewport_size({"width": width, "height": height})
        page.wait_for_timeout(1500)     # plotly redraws at the new width
        for lesson in ("tf.add_n", "grad 6", "dy_dx"):
            assert crossed_labels(page, lesson) == [], (lesson, width)
        assert label_overlaps(page) == []
    assert_no_exception(page)
    assert "example=higher_order" in page.url
    page.screenshot(path=screenshot_path("debugger_higher_order.png"))


def test_mnist_step_grouped_by_layer(server, page, tmp_path):
    open_example(page, server, "mnist_step")
    assert_no_exception(page)
    # the reference: the layers Keras builds for the same program under plain TensorFlow
    source = examples.code("mnist_step")
    layers = plain(source + "\nprint(*[layer.name for layer in model.layers])\n", tmp_path)[-1].split()
    # each layer is one node of the chart, labelled (first line) with the layer's name, but
    # the last, whose output the program names (`logits = model(...)`): that name labels it.
    # The editor's code names the layers too, but it is not the chart.
    output = re.search(r"^\s*(\w+) = model\(", source, re.M).group(1)
    drawn = {label.split("\n")[0] for label in chart_labels(page)}
    assert len(layers) > 2 and {*layers[:-1], output} <= drawn, f"{layers}, {output} not all in {sorted(drawn)}"
    page.screenshot(path=screenshot_path("debugger_mnist_step.png"))


# -- the judged lessons, opened by share link with no clicks --------------------------------
WXB = """import tensorflow as tf
w = tf.Variable(2.0)
b = tf.Variable(1.0)
x = tf.constant(3.0)
with tf.GradientTape() as tape:
    z = w * x + b
dw, db = tape.gradient(z, [w, b])
print(dw.numpy(), db.numpy())
"""
UNWATCHED = """import tensorflow as tf
x = tf.convert_to_tensor(10.)
with tf.GradientTape() as tape:
    y = x * x
print(tape.gradient(y, x))
"""
LOOP = """import tensorflow as tf
x = tf.Variable(1.0)
with tf.GradientTape() as tape:
    y = tf.constant(0.0)
    for i in range(3000):
        y = y * 1.0 + x
print(tape.gradient(y, x))
"""
NO_TAPE = """import tensorflow as tf
a = tf.constant(2.0)
b = tf.constant(3.0)
c = a + b
print(c.numpy())
"""


def open_code(page, server, source):
    from tapeviz.state import share
    page.goto(f"{server}/?code={share.encode(source)}")
    page.wait_for_selector(".js-plotly-plot .scatterlayer", timeout=WAIT_MS)
    page.wait_for_timeout(1500)


def chart_labels(page) -> list:
    """The text of every label drawn on the chart (plotly writes a <br> as separate tspans)."""
    return page.evaluate("""Array.from(document.querySelectorAll('.js-plotly-plot .textpoint text'))
        .map(t => Array.from(t.querySelectorAll('tspan.line')).map(s => s.textContent).join('\\n')
                  || t.textContent)""")


def label_overlaps(page) -> list:
    """Pairs of chart labels whose rendered boxes intersect, measured by the browser."""
    return page.evaluate("""(() => {
        const boxes = Array.from(document.querySelectorAll('.js-plotly-plot .textpoint text'))
            .filter(t => t.textContent).map(t => [t.textContent, t.getBoundingClientRect()]);
        const out = [];
        for (let i = 0; i < boxes.length; i++) for (let j = i + 1; j < boxes.length; j++) {
            const [a, p] = boxes[i], [b, q] = boxes[j];
            if (p.left < q.right && q.left < p.right && p.top < q.bottom && q.top < p.bottom) out.push([a, b]);
        }
        return out; })()""")


def test_wxb_shows_each_variables_gradient_on_its_node(server, page):
    open_code(page, server, WXB)
    labels = chart_labels(page)
    assert "w = 2.0\ngrad 3.0" in labels and "b = 1.0\ngrad 1.0" in labels, labels   # floats, as printed
    assert "Choose an option" not in page.inner_text("body")
    assert label_overlaps(page) == []
    assert_no_exception(page)
    page.screenshot(path=screenshot_path("debugger_wxb.png"))


def test_unwatched_constant_is_explained_unasked(server, page):
    open_code(page, server, UNWATCHED)
    alerts = page.locator("[data-testid='stAlert']").all_inner_texts()
    assert any("is None" in a and "watch" in a for a in alerts), alerts
    notes = page.evaluate("Array.from(document.querySelectorAll('.js-plotly-plot .annotation-text')).map(t => t.textContent)")
    assert any(n.startswith("gradient None") for n in notes), notes
    assert "x = 10.0\ngrad None" in chart_labels(page)
    assert_no_exception(page)
    page.screenshot(path=screenshot_path("debugger_unwatched.png"))


def test_a_3000_op_loop_draws_a_few_markers_naming_the_count(server, page):
    open_code(page, server, LOOP)
    markers = page.evaluate("document.querySelectorAll('.js-plotly-plot .scatterlayer .point').length")
    assert 0 < markers <= 300
    assert any("×3000" in label for label in chart_labels(page))
    assert_no_exception(page)


def test_a_program_without_a_tape_says_so_and_shows_no_placeholder(server, page):
    open_code(page, server, NO_TAPE)
    body = page.inner_text("body")
    assert "Choose an option" not in body and "opened no tf.GradientTape" in body.replace("`", "")
    assert "c = 5.0" in chart_labels(page)
    assert_no_exception(page)


def test_large_text_labels_are_16px_and_never_overlap(server, page):
    open_example(page, server, "higher_order")
    assert label_overlaps(page) == []
    page.get_by_text("Large text").click()
    # the rerun redraws the chart; wait until its labels are the large ones (a failure times out)
    page.wait_for_function("""Array.from(document.querySelectorAll('.js-plotly-plot .textpoint text'))
        .some(t => parseFloat(getComputedStyle(t).fontSize) >= 18)""", timeout=WAIT_MS)
    page.wait_for_timeout(2500)
    sizes = page.evaluate("""Array.from(document.querySelectorAll('.js-plotly-plot .textpoint text'))
        .filter(t => t.textContent).map(t => parseFloat(getComputedStyle(t).fontSize))""")
    assert sizes and min(sizes) >= 16
    assert label_overlaps(page) == []
    page.screenshot(path=screenshot_path("debugger_large_text.png"))


# A program's error is text: its message and its exception's name are shown as typed, and
# no image is fetched and no link drawn from them, on a page opened from its share link.
HOSTILE = """import tensorflow as tf
x = tf.constant(1.0) * 2
evil = type("Evil![t](http://evil.invalid/t.png)", (ValueError,), {})
raise evil("![x](http://evil.invalid/x.png) [Your session expired: log in again](http://evil.invalid/login) "
           "<img src=http://evil.invalid/i.png> www.evil.invalid :red[red]")
"""


def seen(text: str) -> str:
    """Text as a reader takes it: markdown.literal's stand-ins for ":" and its invisible
    word joiner (which stops www. and a@b.c from becoming links) read as what they stand for."""
    return text.replace("∶", ":").replace("\u2060", "")


def test_a_programs_error_renders_as_text_and_fetches_nothing(server, page):
    asked = []
    page.on("request", lambda request: asked.append(request.url))
    open_code(page, server, HOSTILE)
    page.wait_for_selector("[data-testid='stAlert'] >> text=log in again", timeout=WAIT_MS)
    page.wait_for_timeout(1000)
    alerts = page.locator("[data-testid='stAlert']").all_inner_texts()
    said = seen(next(a for a in alerts if "log in again" in a))
    assert "Evil![t](http://evil.invalid/t.png)" in said
    assert ("![x](http://evil.invalid/x.png) [Your session expired: log in again](http://evil.invalid/login) "
            "<img src=http://evil.invalid/i.png> www.evil.invalid :red[red]") in said
    made = page.evaluate("""Array.from(document.querySelectorAll('a[href], img[src]'))
        .map(e => e.getAttribute('href') || e.getAttribute('src'))""")
    assert not [m for m in made if "evil" in m], made
    assert not [url for url in asked if "evil" in url], asked
    status = seen(" ".join(page.locator("[data-testid='stCaptionContainer']").all_inner_texts()))
    assert "it stopped with Evil![t](http://evil.invalid/t.png)" in status, status
    assert_no_exception(page)
