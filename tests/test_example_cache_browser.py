"""A fresh server's first page, drawn from the example's recording made earlier
(tapeviz/server/example_cache.py): in Chromium, the bare address shows that example's own
nodes and says which TensorFlow recorded it, before any worker has run it."""
import time

import pytest

from browser_util import WAIT_MS, assert_no_exception, browser_page, streamlit_server
from tapeviz import examples
from tapeviz.draw import graph
from tapeviz.server import runner
from tapeviz.server.config import Config
from tapeviz.server.example_cache import ExampleCache

pytestmark = pytest.mark.slow   # a worker records the example, then a fresh Streamlit server

TEXTS = """() => Array.from(document.querySelectorAll('.js-plotly-plot .textpoint text'))
    .map(t => t.textContent)"""


def kept_recording(where, name):
    """`name`'s recording made in a worker and kept in `where`, as the server will look it up."""
    env = {"TAPEVIZ_CACHE_DIR": str(where)}
    pool = runner.Runner(Config.from_env(env))
    try:
        cache = ExampleCache(pool.config, where)
        source = examples.code(name)
        assert cache.build([source], lambda s: pool.submit(runner.Record(s)).stream()) == 1
        return cache.lookup(source), env
    finally:
        pool.close()


def test_a_fresh_servers_first_page_draws_the_examples_recording_made_earlier(tmp_path):
    name = examples.names()[0]          # what the bare address opens
    (cached, recorded), env = kept_recording(tmp_path, name)
    rec = recorded.recording
    named = tuple(f"{t.name} = " for t in rec.tensors if t.name)
    own = sorted(label for _, label in graph.build(rec).nodes(data="label")
                 if label and label.startswith(named))     # e.g. "m = [[3], [7]]"
    assert own, "the example should name some tensor the graph draws"
    with streamlit_server(env=env) as url, browser_page() as page:
        t0 = time.perf_counter()
        page.goto(url)
        page.wait_for_function(f"() => ({TEXTS})().some(t => {own!r}.includes(t))",
                               timeout=WAIT_MS)
        print(f"first page drawn {time.perf_counter() - t0:.2f} s after opening")
        status = page.get_by_text("made earlier with TensorFlow")
        status.wait_for(timeout=60_000)
        assert cached.tensorflow in status.inner_text()
        assert_no_exception(page)
