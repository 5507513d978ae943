"""The debugger's drawn graphs, memoised by the run and the View that chose them: the walked
graph and its layout per session in the server's shared memo (bounded in bytes), and the
session's latest figure."""
from __future__ import annotations

import streamlit as st

from ..draw import figures, first_paint, graph, layout
from ..draw.options import View
from ..recording import Recording
from ..state.memo import SharedMemo, graph_bytes
from .session import session_id

MEMO_SIZE = 8     # graphs kept per session: dragging the step slider back and forth stays fast
MEMO_BYTES = 512 * 2**20   # all sessions' drawn graphs together (a full 20,000-op one unfolded: ~65 MB)


@st.cache_resource(show_spinner=False)
def shared_memo() -> SharedMemo:
    # One per server process: every session's drawn graphs, bounded in bytes together.
    return SharedMemo(MEMO_BYTES, MEMO_SIZE)


def drawn(rec: Recording, run_id: int, showing: View):
    """(G, pos) for graph.build(rec, showing), memoised per session by run and the view's
    graph part (a step or a pick draws another figure of the same graph)."""
    memo, session = shared_memo(), session_id()
    key = (run_id, showing.graph_part())
    found = memo.get(session, key)
    if found is None:
        G = graph.build(rec, key[1])
        found = (G, layout.layered(G))
        memo.put(session, key, found, graph_bytes(G))
    G = found[0]
    for note in ("cut", "cut_text"):     # the graph's own wall stopped it: the page says so
        if G.graph.get(note):
            st.warning(G.graph[note], icon=":material/content_cut:")
    return found


def figure(G, pos, run_id: int, showing: View, **data):
    """figures.op_graph(G, pos, showing, **data), memoised on (run, view) for the latest one
    only: its data (flow, the nodes a step reveals) follow from those two."""
    cached = st.session_state.get("_figure")
    if cached is not None and cached[0] == (run_id, showing):
        return cached[1]
    fig = figures.op_graph(G, pos, showing, **data)
    st.session_state["_figure"] = ((run_id, showing), fig)
    return fig


def first_picture(fig):
    """first_paint.picture(fig), memoised with the figure it stands for."""
    cached = st.session_state.get("_first_picture")
    if cached is not None and cached[0] is fig:
        return cached[1]
    picture = first_paint.picture(fig)
    st.session_state["_first_picture"] = (fig, picture)
    return picture
