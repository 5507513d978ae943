"""The drawn-graph memo shared by all sessions (state/memo.py): bounded in bytes together and
in entries per session, least recently used out first; its size estimate checked against
what tracemalloc measures for real drawn graphs."""
import dataclasses
import tracemalloc

from tapeviz.draw import graph, layout
from tapeviz.draw.options import View
from tapeviz.state.memo import SharedMemo, graph_bytes
from tapeviz.recording import Recording


def chain(ops: int) -> Recording:
    """A recording of `ops` ops on distinct lines, each adding its input to a constant."""
    d = {"schema": "tapeviz.recording/1", "source": "", "tapes": [],
         "ops": [{"id": i, "type": "AddV2", "inputs": [2 * i, 2 * i + 1], "outputs": [2 * i + 2],
                  "line": i + 1, "scope": None, "tapes": []} for i in range(ops)],
         "tensors": [{"id": t, "name": None, "shape": [2], "dtype": "float32",
                      "kind": "intermediate" if t % 2 == 0 and t else "constant",
                      "producer": t // 2 - 1 if t % 2 == 0 and t else None} for t in range(2 * ops + 1)]}
    return Recording.from_dict(d)


def drawn(rec):
    G = graph.build(rec, View(fold=False, group=False))
    return G, layout.layered(G)


def test_the_size_estimate_is_near_what_a_drawn_graph_holds():
    for ops in (200, 5_000):
        tracemalloc.start()
        G, pos = drawn(chain(ops))
        held = tracemalloc.get_traced_memory()[0]
        tracemalloc.stop()
        assert held / 2 <= graph_bytes(G) <= held * 2, (ops, held, graph_bytes(G))


def test_the_memo_is_bounded_in_bytes_across_sessions_and_per_session():
    G, pos = drawn(chain(500))
    size = graph_bytes(G)
    memo = SharedMemo(total_bytes=10 * size, per_session=3)
    for session in range(6):
        for run in range(5):
            memo.put(session, run, (G, pos), size)
            assert memo.bytes <= 10 * size
    assert len(memo) == 10 and memo.bytes == 10 * size
    # the newest three of the last sessions are kept, older runs and sessions went first
    assert memo.get(5, 4) is not None and memo.get(5, 1) is None and memo.get(0, 4) is None
    # a read makes an entry recent: the oldest (session 2's) goes, then session 3's
    # unread ones, and the one read outlives them
    memo.get(2, 4)
    for run in range(3):
        memo.put(6, run, (G, pos), size)
    assert memo.get(2, 4) is not None and memo.get(3, 2) is None and memo.get(3, 4) is None


def test_one_graph_over_the_bound_is_still_kept_for_its_page():
    memo = SharedMemo(total_bytes=100, per_session=8)
    memo.put("a", 1, "small", 60)
    memo.put("b", 1, "large", 1_000)
    assert memo.get("b", 1) == "large" and memo.get("a", 1) is None


def test_a_view_keys_its_graph_by_the_graph_choices_only():
    from tapeviz.draw.options import View
    chosen = View(group=False, expand=["sequential/dense"], unfold=["r:forward:3:AddV2"])
    pictured = dataclasses.replace(chosen, legend=False, large_text=True, current="o4", picked="t2",
                                   width=900, height=500)
    # a step, a pick or a resize draws another figure of the same walked graph
    assert pictured.graph_part() == chosen.graph_part() and pictured != chosen
    assert len({chosen, pictured, chosen.graph_part()}) == 2
    assert dataclasses.replace(chosen, fold=False).graph_part() != chosen.graph_part()
    G = graph.build(chain(20), pictured)
    assert set(G) == set(graph.build(chain(20), chosen.graph_part()))
