"""The Streamlit side of a run: one Runner per server process, and a per-session memo of
drawn graphs. Imports Streamlit and runner.py, never TensorFlow (that lives in workers).
"""
from __future__ import annotations

import atexit
from collections import OrderedDict
from typing import Callable, Optional

import streamlit as st

from ..draw import figures, graph, layout
from ..recording import Recording
from ..server.runner import Runner, error_recording

MEMO_SIZE = 8     # graphs kept per session: dragging the step slider back and forth stays fast


@st.cache_resource(show_spinner=False)
def runner() -> Runner:
    # One per server process: it owns the warm worker and the queue every session shares.
    shared = Runner()
    atexit.register(shared.close)    # no idle worker outlives the server
    return shared


def run(source: str, on_wait: Optional[Callable[[int], None]] = None, on_phase=None,
        owner=None, pool: Optional[Runner] = None) -> dict:
    """Record a program in a worker; a recording dict even when the runner itself fails.
    A page's run thread (run_job.py) passes `pool`, fetched in the script thread."""
    try:
        return (pool or runner()).record(source, "program.py", on_wait=on_wait,
                                         on_phase=on_phase, owner=owner)
    except Exception as exc:   # the page must stay up whatever the worker machinery does
        return error_recording(source, "RunnerError", f"{type(exc).__name__}: {exc}",
                               "The app could not start a worker. Try again; if it persists, "
                               "restart the app.")


def drawn(rec: Recording, run_id: int, **options):
    """(G, pos) for graph.build(rec, **options), memoised per session by run and options."""
    memo = st.session_state.setdefault("_drawn", OrderedDict())
    key = (run_id, tuple(sorted((k, tuple(v) if isinstance(v, list) else v) for k, v in options.items())))
    if key in memo:
        memo.move_to_end(key)
        return memo[key]
    G = graph.build(rec, **options)
    memo[key] = (G, layout.layered(G))
    while len(memo) > MEMO_SIZE:
        memo.popitem(last=False)
    return memo[key]


def figure(G, pos, run_id: int, key: tuple, **kwargs):
    """figures.op_graph, memoised on (run, graph options, selection) for the latest one only."""
    cached = st.session_state.get("_figure")
    if cached is not None and cached[0] == (run_id, key):
        return cached[1]
    fig = figures.op_graph(G, pos, **kwargs)
    st.session_state["_figure"] = ((run_id, key), fig)
    return fig
