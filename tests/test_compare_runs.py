"""`tapeviz diff`, `tapeviz.compare`, the notebook's questions and the Model Explorer export on
real recordings (the real worker records each pair), checked against what plain TensorFlow
printed for the same programs."""
import json
import math
from concurrent.futures import ThreadPoolExecutor

import pytest

import tapeviz
from tapeviz.matching import match, numbers
from tapeviz.draw.overview import as_recording
from compare_runs import (FLOWING, NAN_LOOP, SEEDED, STOPPED, TRACED, line_of, plain, record,
                          tapeviz as run_cli)

pytestmark = pytest.mark.slow   # each recording is a worker process of its own


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    d = tmp_path_factory.mktemp("pairs")
    made = {
        "nan": (record, "nan_loop", NAN_LOOP), "nan_ref": (plain, "nan_loop", NAN_LOOP),
        "stopped": (record, "stopped", STOPPED), "flowing": (record, "flowing", FLOWING),
        "stopped_ref": (plain, "stopped", STOPPED), "flowing_ref": (plain, "flowing", FLOWING),
        "traced": (record, "traced", TRACED), "eager": (record, "eager", TRACED, "--eager"),
        "traced_ref": (plain, "traced", TRACED),
        "seed_a": (record, "seed_a", SEEDED), "seed_b": (record, "seed_b", SEEDED),
        "seed_ref": (plain, "seed", SEEDED),
    }
    # Twelve fresh processes, most of each one TensorFlow's import: three at a time, since
    # one after another they took two and a half minutes of a busy machine's suite
    with ThreadPoolExecutor(3) as pool:
        futures = {key: pool.submit(how, d, *args) for key, (how, *args) in made.items()}
        return {**{key: f.result() for key, f in futures.items()}, "dir": d}


def test_two_steps_where_the_second_turns_nan(runs):
    ref = runs["nan_ref"]
    assert not math.isnan(ref["loss"][0]) and math.isnan(ref["loss"][1])    # plain TF: step 1 is NaN
    result = run_cli("diff", str(runs["nan"]), "--step", "0:1")
    assert result.returncode == 1, result.stderr
    log_line = line_of(NAN_LOOP, "tf.math.log")
    assert f"step 1 turns NaN at line {log_line}" in result.stdout
    assert "`tf.math.log`" in result.stdout
    rec = as_recording(runs["nan"])
    cmp = match.compare(rec, rec, step_a=0, step_b=1)
    first = cmp.first_row()
    assert (first.op, first.line_a, first.value_mark, first.value_side) == ("Log", log_line, "nan", "b")
    read = next(r for r in cmp.rows if r.op == "ReadVariableOp")      # w itself moved between steps
    w0, w1 = ref["w"]
    assert read.value_diff == pytest.approx(abs(w0 - w1) / max(abs(w0), abs(w1)), rel=1e-5)
    grad = next(g for g in cmp.gradients if g.source == "w")
    assert rec.tensor(grad.grad_a).value == pytest.approx(ref["grad"][0], rel=1e-6)
    assert grad.mark == "nan" and grad.side == "b"


def test_removing_a_stop_gradient_finds_the_removed_op_and_the_gradient_it_freed(runs):
    before, after = runs["stopped_ref"], runs["flowing_ref"]
    assert before[0] is None and after[0] is not None            # plain TF's gradients of w
    result = run_cli("diff", str(runs["stopped"]), str(runs["flowing"]))
    assert result.returncode == 1, result.stderr
    line = line_of(STOPPED, "tf.stop_gradient")
    said = f"the edit removed `tf.stop_gradient` at line {line}: `w`'s gradient went from None to {after[0]:g}"
    assert said in result.stdout
    table = tapeviz.compare(runs["stopped"], runs["flowing"])
    rows = rows_of(table)
    removed = [r for r in rows if r["status"] == "removed"]
    assert [(r["op"], r["line_a"]) for r in removed] == [("StopGradient", line)]
    # the lines below the edit moved up one, and still matched: `y = h + b` is AddV2 on both
    add = next(r for r in rows if r["op"] == "AddV2")
    assert add["line_b"] == add["line_a"] - 1 == line_of(FLOWING, "y = h + b")
    assert add["value_diff"] == 0 and add["status"] == "same"
    cmp = match.compare(as_recording(runs["stopped"]), as_recording(runs["flowing"]))
    w = next(g for g in cmp.gradients if g.source == "w")
    assert w.grad_a is None and "no path" in w.reason_a
    assert cmp.b.tensor(w.grad_b).value == pytest.approx(after[0])
    b = next(g for g in cmp.gradients if g.source == "b")
    assert b.diff == 0 and before[1] == after[1]


def test_eager_against_tf_function(runs):
    ref = runs["traced_ref"]
    result = run_cli("diff", str(runs["eager"]), str(runs["traced"]))
    assert result.returncode == 1, result.stderr
    call_line = line_of(TRACED, "loss, g = step(x)")
    assert f"B ran `step` at line {call_line} as one tf.function call" in result.stdout
    cmp = match.compare(as_recording(runs["eager"]), as_recording(runs["traced"]))
    assert (cmp.first_row().op, cmp.first_row().line_b, cmp.first_row().status) == ("step", call_line, "added")
    # the eager side has the values plain TF computed; the traced side's ops have none
    eager = cmp.a
    loss = next(r for r in cmp.rows if r.op == "Sum")
    assert eager.tensor(loss.tensor_a).value == pytest.approx(ref["loss"])
    assert loss.value_mark == numbers.NO_VALUE and not loss.breaks()
    # the compiled call's own outputs have values: they equal the eager run's `loss` and `g`
    results = {r["name"]: r for r in cmp.results}
    assert (results["loss"]["diff"], results["loss"]["mark"]) == (0.0, None) and "g" in results
    grad = next(g for g in cmp.gradients if g.source == "w")
    assert numbers.flat(eager.tensor(grad.grad_a).value) == pytest.approx(numbers.flat(ref["grad"]))


def test_two_identical_seeded_runs_match_and_exit_0(runs):
    result = run_cli("diff", str(runs["seed_a"]), str(runs["seed_b"]), "--rtol", "0")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "match within rtol 0" in result.stdout
    rec = as_recording(runs["seed_a"])
    rows = tapeviz.compare(runs["seed_a"], runs["seed_b"], rtol=0)
    assert len(rows) == len(rec.ops)
    grad = next(g for g in match.compare(rec, as_recording(runs["seed_b"])).gradients if g.source == "w")
    assert numbers.flat(rec.tensor(grad.grad_a).value) == pytest.approx(numbers.flat(runs["seed_ref"]["grad"]), rel=1e-6)


def test_diff_refuses_bad_usage_with_2(runs):
    assert run_cli("diff", str(runs["seed_a"])).returncode == 2
    missing = run_cli("diff", str(runs["seed_a"]), str(runs["dir"] / "nope.json"))
    assert missing.returncode == 2 and "cannot read" in missing.stderr
    step = run_cli("diff", str(runs["seed_a"]), "--step", "0:3")
    assert step.returncode == 2 and "no step 3" in step.stderr
    junk = runs["dir"] / "junk.json"
    junk.write_text("{\"schema\": 1}")
    assert run_cli("diff", str(junk), str(runs["seed_a"])).returncode == 2


def rows_of(table) -> list:
    """Plain rows of a notebook answer, a DataFrame (pandas installed) or rows already."""
    return table.to_dict("records") if hasattr(table, "to_dict") else table


def test_the_notebooks_questions(runs):
    ref = runs["nan_ref"]
    first = tapeviz.first_nan(runs["nan"])
    assert (first["op"], first["line"], first["phase"]) == ("Log", line_of(NAN_LOOP, "tf.math.log"), "forward")
    w1 = ref["w"][1]
    assert list(first["inputs"]) == ["w"]
    assert float(first["inputs"]["w"]) == pytest.approx(w1, rel=1e-6)   # as NumPy prints it
    nones = tapeviz.none_gradients(runs["stopped"])
    rows = rows_of(nones)
    assert [(r["source"], r["line"]) for r in rows] == [("w", line_of(STOPPED, "tape.gradient"))]
    audit = tapeviz.gradient_audit(runs["nan"], exploding=5.0)
    rows = rows_of(audit)
    (w,) = rows
    assert (w["variable"], w["steps"], w["nan"], w["exploding"]) == ("w", 2, 1, int(ref["grad"][0] > 5.0))
    assert w["max_norm"] == pytest.approx(abs(ref["grad"][0]), rel=1e-6)
    steps = rows_of(tapeviz.gradient_audit(runs["nan"], exploding=1e9, per_step=True))
    assert [r["verdict"] for r in steps] == ["ok", "nan"]


def test_model_explorer_export(runs):
    out = runs["dir"] / "graph.json"
    result = run_cli("export", "--model-explorer", str(runs["nan"]), "-o", str(out))
    assert result.returncode == 0, result.stderr
    collection = json.loads(out.read_text())
    (graph,) = collection["graphs"]
    rec = as_recording(runs["nan"])
    ops = {n["id"]: n for n in graph["nodes"] if n["id"].startswith("op")}
    assert len(ops) == len(rec.ops)
    ids = {n["id"] for n in graph["nodes"]}
    for node in graph["nodes"]:
        assert set(node) >= {"id", "label", "namespace", "attrs", "incomingEdges", "outputsMetadata"}
        assert all(e["sourceNodeId"] in ids for e in node["incomingEdges"])
    log = next(n for n in ops.values() if n["label"] == "Log")
    assert {"key": "line", "value": str(line_of(NAN_LOOP, "tf.math.log"))} in log["attrs"]
    backward = [n for n in ops.values() if n["namespace"].startswith("gradient")]
    assert len(backward) == sum(1 for op in rec.ops if op.phase == "backward")
    grads = json.loads((runs["dir"] / "graph.gradient_norms.json").read_text())["run"]["results"]
    first_log = min(op.id for op in rec.ops if op.type == "Log")
    flow = next(f for f in rec.tapes[0].gradients[0].flow if f.tensor == rec.op(first_log).outputs[0])
    assert grads[f"op{first_log}"]["value"] == pytest.approx(flow.norm)
