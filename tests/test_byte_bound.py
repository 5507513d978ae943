"""The recording's byte bound (worker/byte_bound.py) on plain recording dicts: what goes,
oldest first, and what always stays. The reference for "fits" is json.dumps itself."""
import copy
import json

from tapeviz.worker import byte_bound


def recording(steps: int, ops_per_tape: int, flow_per_call: int, kept_from_step: int) -> dict:
    """A recording of `steps` tapes, each `ops_per_tape` ops (only those of tapes from
    `kept_from_step` on are kept, as the op bound leaves them) and a gradient call whose flow
    names `flow_per_call` tensors of its own."""
    ops, tensors, tapes = [], [], []
    tid = op_id = 0
    for step in range(steps):
        tape_ops, flow = [], []
        for _ in range(ops_per_tape):
            if step >= kept_from_step:
                ops.append({"id": op_id, "type": "MatMul", "inputs": [tid], "outputs": [tid + 1],
                            "line": 5, "tapes": [step]})
                tape_ops.append(op_id)
            tensors += [{"id": tid, "value": [0.5] * 64}, {"id": tid + 1, "value": [0.25] * 64}]
            flow.append({"tensor": tid + 1, "norm": 1.0})
            tid += 2
            op_id += 1
        tapes.append({"id": step, "line": 4, "ops": tape_ops, "watched": [],
                      "gradients": [{"line": 9, "kind": "gradient", "target": [tid - 1],
                                     "sources": [tid - 2], "results": [],
                                     "flow": flow[:flow_per_call]}]})
    return {"schema": "tapeviz.recording/1", "source": "print(1)\n", "stdout": "loss 0.59\n" * 50,
            "stderr": "a warning\n", "error": None, "ops": ops,
            "tensors": tensors, "tapes": tapes,
            "alerts": [], "warnings": [], "dropped": {"ops": 123}}


def size(rec: dict) -> int:
    return len(json.dumps(rec))


def referenced(rec: dict) -> set:
    return byte_bound._referenced(rec)


def test_a_recording_within_the_bound_is_left_as_it_is():
    rec = recording(steps=4, ops_per_tape=10, flow_per_call=10, kept_from_step=0)
    before = json.dumps(rec)
    byte_bound.fit(rec, max_bytes=len(before) + 1, max_tensors=10_000)
    assert json.dumps(rec) == before


def test_flows_of_tapes_whose_ops_were_dropped_go_first_oldest_first():
    rec = recording(steps=10, ops_per_tape=50, flow_per_call=50, kept_from_step=8)
    # the reference: the same recording with the 8 old tapes' flows, and the tensors only
    # they named, taken out by hand (plus room for the note each emptied call gets)
    expected = copy.deepcopy(rec)
    for tape in expected["tapes"][:8]:
        tape["gradients"][0]["flow"] = []
    named = referenced(expected)
    expected["tensors"] = [t for t in expected["tensors"] if t["id"] in named]
    newest_flows = [t["gradients"][0]["flow"] for t in rec["tapes"][8:]]
    byte_bound.fit(rec, max_bytes=size(expected) + 8 * 100, max_tensors=100_000)
    assert size(rec) <= size(expected) + 8 * 100
    assert [len(t["gradients"][0]["flow"]) for t in rec["tapes"][:8]] == [0] * 8
    assert [t["gradients"][0]["flow"] for t in rec["tapes"][8:]] == newest_flows
    assert len(rec["ops"]) == 100, "no op had to go"
    assert rec["dropped"]["flow entries"] == 8 * 50 and rec["dropped"]["ops"] == 123
    assert {t["id"] for t in rec["tensors"]} == named


def test_a_looser_bound_takes_only_the_oldest_flows():
    rec = recording(steps=10, ops_per_tape=50, flow_per_call=50, kept_from_step=8)
    byte_bound.fit(rec, max_bytes=size(rec) * 7 // 10, max_tensors=100_000)
    lengths = [len(t["gradients"][0]["flow"]) for t in rec["tapes"]]
    k = lengths.count(0)
    assert 0 < k < 8 and lengths == [0] * k + [50] * (10 - k)


def test_then_the_oldest_ops_go_and_output_and_status_always_stay():
    rec = recording(steps=10, ops_per_tape=50, flow_per_call=50, kept_from_step=0)
    stdout, stderr, newest = rec["stdout"], rec["stderr"], rec["ops"][-1]["id"]
    bound = size(rec) // 5
    byte_bound.fit(rec, max_bytes=bound, max_tensors=100_000)
    assert size(rec) <= bound
    assert rec["stdout"] == stdout and rec["stderr"] == stderr and rec["error"] is None
    ids = [op["id"] for op in rec["ops"]]
    assert ids and ids[-1] == newest and ids == list(range(ids[0], newest + 1)), "a newest run"
    assert rec["dropped"]["ops"] == 123 + ids[0]
    assert rec["dropped"]["flow entries"] == 10 * 50
    kept = set(ids)
    assert all(set(t["ops"]) <= kept for t in rec["tapes"])
    present = {t["id"] for t in rec["tensors"]}
    for op in rec["ops"]:
        assert set(op["inputs"]) | set(op["outputs"]) <= present, "a kept op's tensors stay"


def test_the_tensor_count_bound_is_kept_too():
    rec = recording(steps=10, ops_per_tape=20, flow_per_call=20, kept_from_step=9)
    byte_bound.fit(rec, max_bytes=size(rec), max_tensors=100)
    assert len(rec["tensors"]) <= 100
    assert rec["dropped"]["tensors"] == 400 - len(rec["tensors"])


def rollouts_and_steps(steps: int, rollout: int, block: int) -> dict:
    """A recording of `steps` train steps, each a rollout of `rollout` ops outside any tape,
    then a tape's `with` block of `block` ops: all on the tape but its first, a constant the
    tape did not record (inside its recording span)."""
    rec = recording(steps=0, ops_per_tape=0, flow_per_call=0, kept_from_step=0)
    op_id = 0
    for step in range(steps):
        for i in range(rollout + block):
            on_tape = i > rollout
            rec["ops"].append({"id": op_id, "type": "MatMul" if on_tape else "Tanh",
                               "inputs": [2 * op_id], "outputs": [2 * op_id + 1], "line": 5,
                               "tapes": [step] if on_tape else []})
            rec["tensors"] += [{"id": 2 * op_id, "value": [0.5] * 64},
                               {"id": 2 * op_id + 1, "value": [0.25] * 64}]
            op_id += 1
        rec["tapes"].append({"id": step, "line": 4, "watched": [], "gradients": [],
                             "ops": list(range(op_id - block + 1, op_id)),
                             "recording_spans": [[op_id - block, op_id]]})
    return rec


def without(rec: dict, op_ids: set) -> dict:
    """`rec` with those ops, and the tensors only they named, taken out by hand."""
    rec = copy.deepcopy(rec)
    rec["ops"] = [op for op in rec["ops"] if op["id"] not in op_ids]
    named = referenced(rec)
    rec["tensors"] = [t for t in rec["tensors"] if t["id"] in named]
    return rec


def test_ops_outside_any_tape_go_before_a_tapes_ops():
    rec = rollouts_and_steps(steps=4, rollout=100, block=20)
    in_blocks = {i for t in rec["tapes"] for s, e in t["recording_spans"] for i in range(s, e)}
    outside = [op["id"] for op in rec["ops"] if op["id"] not in in_blocks]
    # the reference: every rollout op but the newest 50 taken out by hand (plus room for
    # the counts `dropped` gains)
    expected = without(rec, set(outside[:-50]))
    byte_bound.fit(rec, max_bytes=size(expected) + 40, max_tensors=100_000)
    assert size(rec) <= size(expected) + 40
    kept = [op["id"] for op in rec["ops"]]
    assert in_blocks <= set(kept), "every tape's block is whole"
    assert all(set(t["ops"]) == set(range(s + 1, e)) for t in rec["tapes"]
               for s, e in t["recording_spans"])
    rollout_kept = [i for i in kept if i not in in_blocks]
    assert rollout_kept == outside[-len(rollout_kept):] and len(rollout_kept) >= 50 - 5
    assert rec["dropped"]["ops"] == 123 + len(outside) - len(rollout_kept)


def test_past_the_rollouts_the_oldest_tape_ops_go():
    rec = rollouts_and_steps(steps=4, rollout=100, block=20)
    in_blocks = {i for t in rec["tapes"] for s, e in t["recording_spans"] for i in range(s, e)}
    bound = size(without(rec, {op["id"] for op in rec["ops"]} - in_blocks)) * 3 // 4
    byte_bound.fit(rec, max_bytes=bound, max_tensors=100_000)
    assert size(rec) <= bound
    kept = [op["id"] for op in rec["ops"]]
    assert set(kept) <= in_blocks, "no rollout op outlives a tape's"
    blocks = sorted(in_blocks)
    assert kept == blocks[-len(kept):], "the newest blocks' ops, a run of them"
    assert rec["tapes"][-1]["ops"] == list(range(blocks[-19], blocks[-1] + 1))
