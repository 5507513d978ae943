"""The examples' recordings made earlier (tapeviz/server/example_cache.py): what a fresh
server draws at once is what a live run of the example draws, a file the gate refuses is
never drawn, and a recording made under another TensorFlow or other limits is not reused.
The fresh server's first page in Chromium is tests/test_example_cache_browser.py."""
import json
import re

import pytest

from tapeviz import examples
from tapeviz import recording_gate as gate
from tapeviz.draw import graph
from tapeviz.draw.options import View
from tapeviz.server import runner
from tapeviz.server.config import Config, Limits
from tapeviz.server.example_cache import Cached, ExampleCache, folder
from tapeviz.server.jobs import Recorded
from tapeviz.state import view
from tapeviz.state.link_runs import CACHED, LinkRuns

SOURCE = "import tensorflow as tf\nprint(tf.constant(1.0))\n"


def recorded(source=SOURCE, error_type=None) -> Recorded:
    error = {"type": error_type, "message": "", "line": None} if error_type else None
    return Recorded(*gate.read({"schema": "tapeviz.recording/1", "source": source, "error": error}))


def shown(rec) -> list:
    """What the page draws of a recording on arrival: each node's label and hover text,
    but how long each op took (another run's timing)."""
    G = graph.build(rec, View(tape=view.default_tape(rec), group=graph.opens_grouped(rec)))
    return sorted((n, d.get("label"), re.sub(r"(?m)^[\d.,]+ [µm]?s$", "", d.get("hover") or ""))
                  for n, d in G.nodes(data=True))


def test_the_folder_is_the_users_cache_or_the_environments_or_none():
    assert folder({"XDG_CACHE_HOME": "/c"}) == folder({"HOME": "/h", "XDG_CACHE_HOME": "/c"})
    assert str(folder({"XDG_CACHE_HOME": "/c"})).startswith("/c/")
    assert str(folder({"TAPEVIZ_CACHE_DIR": "/k", "XDG_CACHE_HOME": "/c"})) == "/k"
    assert folder({"TAPEVIZ_CACHE_DIR": "off"}) is None


def test_a_kept_recording_is_found_only_for_its_program_tensorflow_and_limits(tmp_path):
    cache = ExampleCache(Config(), tmp_path, tf_version="2.99.0")
    assert cache.lookup(SOURCE) is None
    assert cache.keep(SOURCE, recorded())
    event, found = cache.lookup(SOURCE)
    assert event == Cached("2.99.0") and found.recording.source == SOURCE
    again = ExampleCache(Config(), tmp_path, tf_version="2.99.0").lookup(SOURCE)  # from the file
    assert again[1].data == found.data
    assert ExampleCache(Config(), tmp_path, tf_version="2.98.0").lookup(SOURCE) is None
    assert ExampleCache(Config(limits=Limits(max_ops=10)), tmp_path, "2.99.0").lookup(SOURCE) is None
    assert cache.lookup(SOURCE + "print(2)\n") is None


def test_a_run_cut_short_is_not_kept_but_the_programs_own_error_is(tmp_path):
    cache = ExampleCache(Config(), tmp_path, tf_version="2.99.0")
    assert not cache.keep(SOURCE, recorded(error_type="Timeout"))
    assert cache.lookup(SOURCE) is None
    assert cache.keep(SOURCE, recorded(error_type="ValueError"))
    assert cache.lookup(SOURCE)[1].recording.error.type == "ValueError"


@pytest.mark.parametrize("tamper", [
    lambda text: text[: len(text) // 2],                                   # half a file
    lambda text: text.replace('"tapeviz.recording/1"', '"something/9"'),   # not a recording
    lambda text: text.replace("tf.constant(1.0)", "tf.constant(6.0)"),     # another program's
])
def test_a_file_the_gate_refuses_is_not_drawn(tmp_path, tamper):
    cache = ExampleCache(Config(), tmp_path, tf_version="2.99.0")
    cache.keep(SOURCE, recorded())
    path = cache.path(SOURCE)
    path.write_text(tamper(path.read_text()))
    assert ExampleCache(Config(), tmp_path, tf_version="2.99.0").lookup(SOURCE) is None


def test_a_link_draws_the_earlier_recording_without_a_run(tmp_path):
    cache = ExampleCache(Config(), tmp_path, tf_version="2.99.0")
    cache.keep(SOURCE, recorded())
    runs = []
    events = list(LinkRuns(900, cached=cache.lookup).events(SOURCE, submit=runs.append))
    assert not runs
    assert events[0].name == CACHED and events[1] == Cached("2.99.0")
    assert events[2].recording.source == SOURCE


@pytest.mark.slow     # real workers record the examples
def test_a_kept_recording_shows_what_a_live_run_shows(tmp_path):
    pool = runner.Runner(runner.Config(warm=1))
    names = ["higher_order", "linear_gradient", "none_gradients"]
    try:
        cache = ExampleCache(pool.config, tmp_path)
        assert cache.on, "no TensorFlow version found in the package metadata"

        def record(source):
            return pool.submit(runner.Record(source)).stream()
        assert cache.build([examples.code(n) for n in names], record) == len(names)
        assert cache.build([examples.code(n) for n in names], record) == 0     # all kept
        for name in names:
            source = examples.code(name)
            kept = ExampleCache(pool.config, tmp_path).lookup(source)[1].recording  # from disk
            live = gate.read(pool.record(source)).recording
            assert shown(kept) == shown(live), name
            # the values and gradients themselves, not only their words
            assert [t.value for t in kept.tensors] == [t.value for t in live.tensors], name
            assert [[(r.source, r.grad, r.none_reason) for r in c.results]
                    for tp in kept.tapes for c in tp.gradients] == \
                   [[(r.source, r.grad, r.none_reason) for r in c.results]
                    for tp in live.tapes for c in tp.gradients], name
        assert json.loads(cache.path(examples.code(names[0])).read_text())["source"] == \
            examples.code(names[0])
    finally:
        pool.close()
