"""The compare room on hand-built recordings (tests/builders.py): ops matched by the line as
written when an edit moves lines, relative differences and their NaN and None marks, kept
steps, the sentence, the page's compare state and the Model Explorer graph."""
import math

from builders import Builder, wxb
from tapeviz.draw import compare_figures, graph
from tapeviz.matching import match, model_explorer, numbers, steps
from tapeviz.recording import Tape
from tapeviz.state import compare as compare_state
from tapeviz.words import compare as words


def program(lines: list, values: dict, program_name="p.py"):
    """One op per line of `lines` (its op type the line's first word), each output's value from
    `values` by line text, on one tape: the recording of a straight-line program."""
    b = Builder()
    b.rec.source = "\n".join(lines) + "\n"
    b.rec.program = program_name
    x = b.tensor("x", "constant", value=1.0)
    prev = x
    for number, text in enumerate(lines, 1):
        op_type = text.split()[0]
        prev = b.op(op_type, [prev], line=number, name=text.split()[1])
        b.rec.tensor(prev).value = values.get(text, 1.0)
    b.rec.tapes.append(Tape(id=1, line=None, persistent=False, watch_accessed_variables=True,
                            parent=None, ops=[op.id for op in b.rec.ops]))
    return b.rec


def test_an_inserted_line_moves_the_rest_and_they_still_match():
    before = ["Mul a", "Exp b", "Log c"]
    after = ["Mul a", "Sqrt extra", "Exp b", "Log c"]
    a = program(before, {"Log c": 2.0})
    b = program(after, {"Log c": 2.5})
    cmp = match.compare(a, b)
    pairs = [(r.op, r.line_a, r.line_b, r.status) for r in cmp.rows]
    assert pairs == [("Mul", 1, 1, "same"), ("Sqrt", None, 2, "added"), ("Exp", 2, 3, "same"),
                     ("Log", 3, 4, "differs")]
    log = cmp.rows[-1]
    assert log.value_diff == numbers.relative(2.0, 2.5) == 0.5 / 2.5
    assert cmp.first_row().op == "Sqrt"          # an op on one side only parts them first
    assert cmp.first_numeric == 3
    assert words.divergence(cmp, ("A", "B")).startswith("the edit added `tf.sqrt` at line 2")


def test_an_edited_line_still_matches_its_op_by_type():
    a = program(["Mul a", "Exp b"], {"Exp b": 3.0})
    b = program(["Mul a", "Exp b_renamed"], {"Exp b_renamed": 3.0})
    b.source = b.source.replace("Exp b_renamed", "Exp b  # renamed")
    cmp = match.compare(a, b)
    assert [(r.op, r.status) for r in cmp.rows] == [("Mul", "same"), ("Exp", "same")]
    assert not cmp.differ


def test_nan_on_one_side_is_a_mark_not_a_number():
    a = program(["Mul a", "Log b"], {"Log b": [1.0, 2.0]})
    b = program(["Mul a", "Log b"], {"Log b": [1.0, "nan"]})
    for t in (a.tensors[-1], b.tensors[-1]):
        t.shape = [2]
    cmp = match.compare(a, b, rtol=0.1)
    log = cmp.rows[1]
    assert (log.value_mark, log.value_side, log.value_diff) == ("nan", "b", 0.0)
    assert cmp.first_row() is log and cmp.differ
    assert "B turns NaN at line 2" in words.divergence(cmp, ("A", "B"))


def test_values_apart_and_relative():
    assert numbers.values_apart([1.0, 2.0], [1.0, 2.2]) == (abs(2.0 - 2.2) / 2.2, None)
    assert numbers.values_apart([math.nan], [math.nan]) == (0.0, None)
    assert numbers.values_apart([math.inf], [1.0])[1] == "inf"
    assert numbers.relative(0.0, 1e-12) == 0.0 and numbers.relative(0.0, 1.0) == 1.0
    assert numbers.grads_apart(None, (1.0, 1.0)) == (None, "none")
    assert numbers.grads_apart((None, 4.0), (None, 5.0)) == (0.2, None)


def test_the_same_recording_matches_itself_within_rtol_0():
    rec, _ = wxb()
    cmp = match.compare(rec, rec, rtol=0)
    assert not cmp.differ and cmp.first is None
    assert len(cmp.rows) == len(rec.ops) and cmp.counts == {"same": len(rec.ops)}
    assert all(g.diff in (None, 0.0) for g in cmp.gradients)


def two_steps():
    """Two kept steps of one loop: each a tape of one Mul on line 2 and the update after it."""
    b = Builder()
    b.rec.source = "for step in range(2):\n    y = w * x\n    w.assign_sub(y)\n"
    w = b.tensor("w", "variable", value=1.0)
    for tape_id, value in ((1, 2.0), (2, 4.0)):
        y = b.op("Mul", [w], line=2, name="y", tapes=(tape_id,))
        b.rec.tensor(y).value = value
        b.op("AssignSubVariableOp", [w, y], line=3, tapes=())
        b.rec.tapes.append(Tape(id=tape_id, line=1, persistent=False, watch_accessed_variables=True,
                                parent=None, ops=[b.rec.ops[-2].id]))
    return b.rec


def test_two_steps_of_one_run():
    rec = two_steps()
    assert len(steps.kept_steps(rec)) == 2
    assert [op.type for op in steps.part(rec, 1).ops] == ["Mul", "AssignSubVariableOp"]
    cmp = match.compare(rec, rec, step_a=0, step_b=1)
    assert cmp.rows[0].value_diff == numbers.relative(2.0, 4.0)
    assert words.side_names(0, 1, same_file=True) == ("step 0", "step 1")
    try:
        steps.part(rec, 2)
    except steps.NoSuchStep as e:
        assert "keeps 2 steps (0 to 1)" in str(e)
    else:
        raise AssertionError("step 2 of 2 was given")


def test_the_page_keeps_the_previous_run_and_compares_the_chosen_pair():
    session = {}
    cs = compare_state.of(session)
    first, second = program(["Mul a"], {"Mul a": 1.0}), program(["Mul a"], {"Mul a": 2.0})
    cs.noticed(first)
    assert cs.choices(first) == [compare_state.OPENED]     # no previous run yet
    cs.noticed(second)
    assert cs.previous is first and cs.choices(second)[0] == compare_state.PREVIOUS
    session[compare_state.WITH] = compare_state.PREVIOUS
    pair = cs.pair(second, session)
    assert pair.a is first and pair.b is second and pair.comparison.rows[0].value_diff == 0.5
    assert cs.pair(second, session) is pair                 # memoised: a rerun draws, not compares
    assert cs.picked_ops(pair) == (first.ops[0].id, second.ops[0].id)
    cs.pick("b", second.ops[0].id)
    assert cs.picked_ops(pair) == (first.ops[0].id, second.ops[0].id)
    cs.open_bytes(b"{not json", "bad.json")
    assert cs.opened is None and cs.problem


def test_default_steps_open_on_the_step_that_turned_nan():
    from tapeviz.recording import Alert
    rec = two_steps()
    assert compare_state.default_steps(rec) == (0, 1)
    rec.alerts.append(Alert(kind="nan", op=rec.tapes[1].ops[0], tensor=0, line=2))
    assert compare_state.default_steps(rec) == (0, 1)


def test_figures_ring_each_side_and_call_out_the_first_divergence():
    a = program(["Mul a", "Exp b"], {"Exp b": 1.0})
    b = program(["Mul a", "Exp b"], {"Exp b": "nan"})
    cmp = match.compare(a, b)
    G, pos, fig = compare_figures.side_figure(b, cmp, "b", "B")
    names = {t.name for t in fig.data}
    assert "first divergence" in names and compare_figures.WORDS[compare_figures.BROKEN] in names
    node = compare_figures.first_node(cmp, "b", G)
    assert node == graph.op_node(b.ops[1].id)
    assert any(a_.text == "<b>first divergence</b>" for a_ in fig.layout.annotations)


def test_model_explorer_graph_connects_every_edge():
    rec, ids = wxb()
    collection = model_explorer.graph(rec)
    nodes = collection["graphs"][0]["nodes"]
    known = {n["id"] for n in nodes}
    assert all(e["sourceNodeId"] in known for n in nodes for e in n["incomingEdges"])
    z = next(n for n in nodes if n["id"] == model_explorer.node_id(rec.tensor(ids["z"]).producer))
    assert z["label"] == "AddV2" and {"key": "line", "value": "4"} in z["attrs"]
    data = model_explorer.node_data(collection, rec, None, "gradient")["run"]["results"]
    assert data[z["id"]]["value"] == 1.0     # the flow's d z / d z
