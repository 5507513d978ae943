"""The gate every recording the server reads passes (recording_gate): real recordings made by
the recorder (the examples, a CNN training loop up to the op bound) pass it; forged ones are
refused with a plain sentence, cheaply, whatever they hold: a million inputs to one op, ids
no tensor has, 100,000 levels of nesting, wrong field types, very long names."""
import json

import pytest

from tapeviz import recording_gate as gate
from tapeviz.draw import graph, labels, nodes
from tapeviz.draw.options import View
from tapeviz import examples
from tapeviz.recording import Recording
from tapeviz.server import protocol
from tapeviz.worker import recorder

CNN_LOOP = """
import tensorflow as tf
model = tf.keras.Sequential([tf.keras.layers.Conv2D(4, 3, activation="relu"),
                             tf.keras.layers.Flatten(), tf.keras.layers.Dense(10)])
x = tf.random.normal([8, 8, 8, 1])
y = tf.zeros([8], tf.int32)
opt = tf.keras.optimizers.SGD(0.01)
for step in range(400):
    with tf.GradientTape() as tape:
        logits = model(x)
        loss = tf.reduce_mean(tf.keras.losses.sparse_categorical_crossentropy(y, logits, from_logits=True))
    grads = tape.gradient(loss, model.trainable_variables)
    opt.apply_gradients(zip(grads, model.trainable_variables))
"""


@pytest.fixture(scope="module")
def cnn():
    """A real recording at the recorder's op bound, as the worker sends it."""
    rec = recorder.record(CNN_LOOP, timeout=600)
    assert rec.error is None, rec.error
    assert len(rec.ops) == gate.MAX_OPS        # the loop ran past the bound: the worst honest case
    return json.loads(rec.to_json())


def test_a_cnn_loop_at_the_op_bound_passes_the_gate(cnn):
    assert gate.problem(cnn) is None
    sent = protocol.read_recording(cnn, CNN_LOOP, gate.MAX_OPS, 100_000)     # from a worker
    assert sent.data is cnn and len(sent.recording.ops) == gate.MAX_OPS
    rec, _ = gate.read(json.dumps(cnn).encode(), "cnn.json")                 # from a file
    assert len(rec.ops) == gate.MAX_OPS
    with pytest.raises(protocol.ProtocolError, match="not of the program that was sent"):
        protocol.read_recording(cnn, "print(1)\n", gate.MAX_OPS, 100_000)


@pytest.mark.parametrize("name", examples.names())
def test_every_example_recording_passes_the_gate(name):
    rec = recorder.record(examples.load(name).source, timeout=120)
    d = json.loads(rec.to_json())
    assert gate.problem(d) is None
    back, _ = gate.read(json.dumps(d).encode(), f"{name}.json")
    assert back.to_dict() == Recording.from_dict(d).to_dict()


def test_a_huge_exception_message_passes_cut_to_its_bound():
    rec = recorder.record("raise ValueError('x' * 300_000)\n", timeout=60)
    d = json.loads(rec.to_json())
    assert len(d["error"]["message"]) >= 300_000         # the recorder keeps it whole
    assert gate.problem(d) is None
    assert d["error"]["type"] == "ValueError"
    assert d["error"]["message"].startswith("x" * gate.MAX_TEXT)
    assert d["error"]["message"].endswith("(200,000 characters more not kept)")


@pytest.mark.parametrize("source", ["x = 1\n    y = 2\n", "x = (\n"])
def test_a_syntax_error_with_no_stack_passes_the_gate(source):
    d = json.loads(recorder.record(source, timeout=60).to_json())
    assert d["error"]["type"] in ("IndentationError", "SyntaxError") and d["error"]["stack"] is None
    assert gate.problem(d) is None


def forged(**changes) -> dict:
    """A well-formed one-op recording, with `changes` made to it."""
    d = {"schema": "tapeviz.recording/1", "source": "x = 1\n", "stdout": "", "error": None,
         "ops": [{"id": 0, "type": "AddV2", "inputs": [1, 2], "outputs": [3], "line": 1,
                  "scope": None, "tapes": [], "phase": "forward", "duration_us": 1.0}],
         "tensors": [{"id": i, "name": None, "shape": [], "dtype": "float32", "kind": "constant",
                      "value": 1.0, "stats": None, "producer": 0 if i == 3 else None, "line": 1}
                     for i in (1, 2, 3)],
         "tapes": [], "alerts": [], "warnings": [], "dropped": {}, "duration_s": 0.1}
    for path, value in changes.items():
        *parents, last = path.split("__")
        target = d
        for p in parents:
            target = target[int(p)] if p.isdigit() else target[p]
        target[int(last) if last.isdigit() else last] = value
    return d


def test_the_forged_base_passes():
    assert gate.problem(forged()) is None


HOSTILE = {
    "a million inputs nobody recorded": (dict(ops__0__inputs=list(range(10, 1_000_010))),
                                         "inputs and outputs together"),
    "ids no tensor has": (dict(ops__0__inputs=list(range(10, 100_000))), "did not record"),
    "a very long name": (dict(tensors__0__name="x" * 5_000_000), "field 'name'"),
    "an id that is text": (dict(ops__0__id="0"), "field 'id'"),
    "inputs that are not ids": (dict(ops__0__inputs=[[1], {"a": 1}]), "field 'inputs'"),
    "a tensor that is a list": (dict(tensors__0=[1, 2]), "not an object"),
    "ops that are an object": (dict(ops={"0": {}}), "ops are not a list"),
    "a deep value": (dict(tensors__0__value=json.loads("[" * 500 + "]" * 500)), "field 'value'"),
    "a value too large": (dict(tensors__0__value=[0.0] * 5000), "field 'value'"),
    "a nested unknown field": (dict(ops__0__extra={"a": [1, 2]}), "field 'extra'"),
    "an error that is text": (dict(error="boom"), "error is not well-formed"),
    "files that are a list": (dict(files=["a.py"]), "files"),
    "stdout that is a number": (dict(stdout=12), "stdout"),
}


@pytest.mark.parametrize("case", list(HOSTILE))
def test_a_forged_recording_is_refused_with_a_plain_sentence(case):
    changes, words = HOSTILE[case]
    d = forged(**changes)
    why = gate.problem(d)
    assert why is not None and words in why, why
    assert len(why) < 300
    with pytest.raises(gate.Unreadable) as refused:       # an upload: the same gate
        gate.read(json.dumps(d).encode(), "up.json")
    assert words in str(refused.value) and len(str(refused.value)) < 600
    assert str(refused.value).startswith("up.json ") and refused.value.reason == why


def test_many_names_within_their_length_are_bounded_together():
    tensors = [{"id": i, "name": "n" * 999, "shape": [], "dtype": "float32", "kind": "constant",
                "producer": None} for i in range(20_000)]
    why = gate.problem(forged(tensors=tensors))
    assert why is not None and "characters together" in why


def test_a_100000_deep_json_is_a_plain_refusal_not_a_recursion_error():
    for text in ("[" * 100_000 + "]" * 100_000, '{"a":' * 100_000 + "1" + "}" * 100_000):
        with pytest.raises(gate.Refused, match="nested deeper"):
            gate.parse(text.encode())
        with pytest.raises(gate.Unreadable, match="nested deeper"):
            gate.read(text.encode(), "deep.json")
        with pytest.raises(protocol.ProtocolError, match="nested deeper"):
            protocol.parse(text.encode(), gate.MAX_OPS)



# -- the graph's own wall, behind the gate ------------------------------------------------------

def test_a_real_recording_unfolded_is_drawn_whole(cnn):
    G = graph.build(Recording.from_dict(cnn), View(fold=False, group=False))
    assert "cut" not in G.graph and "cut_text" not in G.graph
    assert len(G) > 20_000


def wide(ops: int, outputs: int, scope: str = None) -> dict:
    """Within the gate, but many nodes: ops on distinct lines (nothing folds), each making
    `outputs` recorded tensors."""
    d = forged()
    d["ops"] = [{"id": i, "type": "Split", "inputs": [], "line": i + 1, "scope": scope,
                 "tapes": [], "phase": "forward",
                 "outputs": list(range(i * outputs, (i + 1) * outputs))} for i in range(ops)]
    d["tensors"] = [{"id": t, "name": None, "shape": [2], "dtype": "float32", "kind": "intermediate",
                     "producer": t // outputs, "line": t // outputs + 1} for t in range(ops * outputs)]
    return d


def test_past_the_node_budget_the_graph_stops_and_says_so():
    d = wide(gate.MAX_OPS, 4)
    assert gate.problem(d) is None           # 100,000 nodes would be drawn without the wall
    rec = Recording.from_dict(d)
    G = graph.build(rec, View(fold=False))
    assert len(G) <= graph.MAX_NODES
    drawn = sum(1 for _, k in G.nodes(data="kind") if k == "op")
    assert f"first {drawn:,} of these {gate.MAX_OPS:,} ops" in G.graph["cut"]
    # the reference: what it drew is exactly the graph of the ops it names
    assert set(G) == set(graph.build(rec, View(fold=False), upto_op=drawn - 1))


def test_past_the_text_budget_labels_and_hovers_are_cut_to_their_share():
    d = wide(gate.MAX_OPS, 3, scope="s" * 400)     # every hover repeats its op's scope
    assert gate.problem(d) is None
    rec = Recording.from_dict(d)
    G = graph.build(rec, View(fold=False, group=False))
    total = sum(len(a["label"]) + len(a["hover"]) for _, a in G.nodes(data=True))
    assert total <= labels.MAX_TEXT and "shortened" in G.graph["cut_text"]
    whole = labels._tensor_hover(rec.tensor(0), nodes.INTERMEDIATE, rec.op(0))
    assert whole.startswith(G.nodes["t0"]["hover"].rstrip("…"))


@pytest.mark.parametrize("data, words", [
    (b"[" + b"[]," * 7_000_000 + b"[]]", "lists"),         # 20 MB that would hold ~500 MiB
    (b'{"a": [' + b'"ab",' * 13_000_000 + b'"ab"]}', "strings"),
])
def test_containers_the_parser_cannot_count_are_counted_before_it_runs(data, words):
    with pytest.raises(gate.Refused, match=f"holds [0-9,]+ {words}"):
        gate.parse(data)


def _with_flow(value) -> dict:
    call = {"line": 1, "kind": "gradient", "target": [3], "sources": [1], "results": [],
            "flow": [{"tensor": 3, "norm": 1.0, "value": value}]}
    return forged(tapes=[{"id": 0, "line": 1, "persistent": False, "watch_accessed_variables": True,
                          "parent": None, "watched": [1], "ops": [0], "gradients": [call]}])


@pytest.mark.parametrize("value", [-2.5, "nan", [[1.0, "-inf"], [0.5, -3.0]]])
def test_a_flow_entrys_signed_value_passes_and_reads_back(value):
    d = _with_flow(value)
    assert gate.problem(d) is None
    assert Recording.from_dict(d).tapes[0].gradients[0].flow[0].value == value


def test_a_flow_value_too_large_is_refused():
    assert "field 'gradients'" in gate.problem(_with_flow([0.0] * 5000))


def test_a_notebooks_dict_is_read_through_the_same_gate():
    from tapeviz.draw import overview
    assert len(overview.as_recording(forged()).ops) == 1
    with pytest.raises(gate.Unreadable, match="field 'id'"):
        overview.as_recording(forged(ops__0__id="0"))
