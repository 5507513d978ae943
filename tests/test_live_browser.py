"""The run view fills while a real program runs, in Chromium (a real Streamlit server, a
real worker running TensorFlow): its first steps show within seconds of the start."""
import time

import pytest

from browser_util import (DRAWN, LIVE, WAIT_MS, browser_page, count, live_title,
                          screenshot_path, streamlit_server)

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def url():
    """One server for the module: each test opens its own page (a session of its own), and
    a closed page's run is cancelled within a second, so the tests do not wait on each other."""
    with streamlit_server() as address:
        yield address

LOOP = """import time
import tensorflow as tf

w = tf.Variable(tf.ones([4, 8]))
b = tf.Variable(tf.zeros([8]))
x = tf.random.normal([16, 4])
for step in range(2000):
    with tf.GradientTape() as tape:
        loss = tf.reduce_mean(tf.nn.relu(x @ w + b) ** 2)
    dw, db = tape.gradient(loss, [w, b])
    w.assign_sub(0.01 * dw)
    b.assign_sub(0.01 * db)
    time.sleep(0.01)
"""


@pytest.mark.parametrize("viewport", [(1600, 1000), (1280, 720)])
def test_the_run_view_fills_while_the_program_runs(url, viewport):
    from tapeviz.state import share
    with browser_page() as page:
        page.set_viewport_size({"width": viewport[0], "height": viewport[1]})
        start = time.monotonic()
        page.goto(f"{url}/?code={share.encode(LOOP)}")
        # the loss, the norms and the gradient heat strips
        page.wait_for_function(f"({LIVE}).length == 1 && ({DRAWN}).length == 3", timeout=WAIT_MS)
        first = live_title(page)
        seen_after = time.monotonic() - start
        # Tag the drawn charts: a chart redrawn in place keeps its node, a remounted one
        # (blank for a moment on a projector) would lose the tag.
        page.evaluate(f"({DRAWN}).forEach(d => d.dataset.seen = 'first')")
        page.wait_for_function(f"({LIVE}).length == 1 && "
                               f"Number(({LIVE})[0].split(' ')[1].replace(/,/g, '')) > {count(first)}",
                               timeout=WAIT_MS)
        page.wait_for_timeout(2000)
        later = live_title(page)
        kept = page.evaluate(f"({DRAWN}).map(d => d.dataset.seen || 'new')")
        page.screenshot(path=screenshot_path(f"live_run_{viewport[0]}x{viewport[1]}.png"))
        print(f"live view after {seen_after:.1f} s of the page's start: {first!r}, then {later!r}")
        assert count(later) > count(first) >= 2     # it fills as the program goes on
        assert kept == ["first"] * 3, kept          # and the charts held still while it did


def test_stop_ends_the_program_and_keeps_every_step_streamed(url):
    from tapeviz.state import share
    with browser_page() as page:
        page.goto(f"{url}/?code={share.encode(LOOP)}")
        page.wait_for_function(f"({LIVE}).length == 1", timeout=WAIT_MS)
        page.wait_for_timeout(1500)
        shown = count(page.evaluate(LIVE)[0])
        page.get_by_role("button", name="Stop, keep the steps").click()
        page.get_by_text("The run, step by step").wait_for(timeout=WAIT_MS)
        # ended as Ctrl+C would end it: the program's KeyboardInterrupt, not a killed worker
        page.get_by_text("stopped from tapeviz, as Ctrl+C would stop it").first.wait_for(
            timeout=WAIT_MS)
        page.wait_for_timeout(1500)
        page.screenshot(path=screenshot_path("live_run_stopped.png"))
        title = page.evaluate("""Array.from(document.querySelectorAll('.js-plotly-plot .gtitle'))
            .map(t => t.textContent).filter(t => t.startsWith('the run:')).join('')""")
        kept = int(title.split()[2].replace(",", ""))
        print(f"live view showed {shown} steps; the stopped run's view holds {kept}: {title!r}")
        assert kept >= shown                          # nothing streamed was lost
        assert kept < 2000                            # the program was ended before its loop


GAN = """import time
import tensorflow as tf

g = tf.Variable(tf.ones([2, 2]))
d = tf.Variable(tf.ones([2, 1]))
z = tf.random.normal([8, 2])
for step in range(2000):
    with tf.GradientTape() as d_tape:
        d_loss = tf.reduce_mean(tf.nn.softplus(-(z @ d)) + tf.nn.softplus((z @ g) @ d))
    d.assign_sub(0.01 * d_tape.gradient(d_loss, d))
    with tf.GradientTape() as g_tape:
        g_loss = tf.reduce_mean(tf.nn.softplus(-((z @ g) @ d)))
    g.assign_sub(0.01 * g_tape.gradient(g_loss, g))
    time.sleep(0.01)
"""


def test_a_gan_loops_two_tapes_are_both_charted_live(url):
    from tapeviz.state import share
    with browser_page() as page:
        page.goto(f"{url}/?code={share.encode(GAN)}")
        # Both calls are charted (loss, norms, heat strips each) once both streamed steps
        both = f"""({LIVE}).map(t => t.split(' ').pop()).sort().join(',') == '10,13'
            && ({DRAWN}).length == 6"""
        page.wait_for_function(both, timeout=WAIT_MS)
        page.screenshot(path=screenshot_path("live_run_gan.png"))
        titles = page.evaluate(LIVE)
        assert all("gradient calls so far" in t for t in titles), titles
