"""`python -m tapeviz record` and the runner behind it, through real worker processes."""
import json
import os
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from tapeviz.server import runner

from plain_runs import finished, started

pytestmark = pytest.mark.slow   # `python -m tapeviz` and Runners: each a process of its own

ROOT = Path(__file__).resolve().parent.parent


def cli(*args, timeout=180):
    return cli_started(*args, timeout=timeout)()


def cli_started(*args, timeout=180, cwd=ROOT):
    """`python -m tapeviz ARGS` started, tapeviz on PYTHONPATH; calling what this returns
    waits for it (plain_runs.started): runs that do not depend on each other go side by side."""
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return started([sys.executable, "-m", "tapeviz", *args], cwd=cwd, env=env, timeout=timeout)


def write(tmp_path, name, text):
    path = tmp_path / name
    path.write_text(textwrap.dedent(text).lstrip("\n"))
    return path


def test_record_writes_the_recording_and_exits_0(tmp_path):
    program = write(tmp_path, "lin.py", """
        import tensorflow as tf
        w = tf.Variable(2.0)
        with tf.GradientTape() as tape:
            z = w * 3.0 + 1.0
        print(tape.gradient(z, w).numpy())
    """)
    out = tmp_path / "run.json"
    result = cli("record", str(program), "-o", str(out))
    assert result.returncode == 0, result.stderr
    data = json.loads(out.read_text())
    assert data["schema"] == "tapeviz.recording/1"
    assert data["error"] is None and data["stdout"] == "3.0\n"
    assert data["tapes"][0]["gradients"][0]["results"][0]["grad"] is not None
    assert any(op["type"] == "Mul" and op["line"] == 4 for op in data["ops"])


def test_record_exits_with_the_programs_own_sys_exit_status(tmp_path):
    program = write(tmp_path, "quits.py", """
        import sys
        import tensorflow as tf
        print(float(tf.constant(2.0) * 3.0))
        sys.exit(3)
    """)
    out = tmp_path / "run.json"
    plain, result = finished(started([sys.executable, str(program)], timeout=180),
                             cli_started("record", str(program), "-o", str(out)))
    assert plain.returncode == 3                      # the reference: plain Python
    assert result.returncode == plain.returncode, result.stderr
    assert json.loads(out.read_text())["stdout"] == plain.stdout


def test_record_exits_1_and_keeps_the_partial_recording_on_an_exception(tmp_path):
    program = write(tmp_path, "bad.py", """
        import tensorflow as tf
        x = tf.constant([1.0, 2.0]) * 2.0
        y = tf.matmul(x, x)
    """)
    out = tmp_path / "run.json"
    result = cli("record", str(program), "-o", str(out))
    assert result.returncode == 1
    data = json.loads(out.read_text())
    assert data["error"]["line"] == 3
    assert [op["type"] for op in data["ops"]][:1] == ["Mul"]
    assert "line 3" in result.stderr


def test_record_timeout_is_reported_as_a_timeout(tmp_path):
    program = write(tmp_path, "loop.py", """
        import tensorflow as tf
        x = tf.constant(1.0) + 1.0
        while True:
            pass
    """)
    out = tmp_path / "run.json"
    result = cli("record", str(program), "-o", str(out), "--timeout", "1")
    assert result.returncode == 1
    data = json.loads(out.read_text())
    assert data["error"]["type"] == "Timeout"
    assert len(data["ops"]) == 1


def test_bad_usage_exits_2(tmp_path):
    missing, bare, soon, help_text = finished(
        cli_started("record", str(tmp_path / "missing.py")), cli_started("record"),
        cli_started("record", __file__, "--timeout", "soon"), cli_started("record", "--help"))
    assert missing.returncode == bare.returncode == soon.returncode == 2
    assert help_text.returncode == 0 and "exit status" in help_text.stdout


def test_a_worker_that_kills_itself_is_an_error_for_that_run_only():
    pool = runner.Runner(runner.Config(warm=1))
    try:
        dead = pool.record("import os\nos.kill(os.getpid(), 9)\n", timeout=20)
        assert dead["error"]["type"] == "WorkerCrash"
        assert "SIGKILL" in dead["error"]["message"]
        alive = pool.record("import tensorflow as tf\nprint(tf.constant(2.0) * 3.0)\n",
                            timeout=20)
        assert alive["error"] is None and "6.0" in alive["stdout"]
    finally:
        pool.close()


def test_syntax_error_through_the_runner_shows_its_line():
    pool = runner.Runner(runner.Config(warm=0))
    try:
        rec = pool.record("x = 1\nif x\n    pass\n", timeout=20)
    finally:
        pool.close()
    assert rec["error"]["type"] == "SyntaxError" and rec["error"]["line"] == 2


def test_hosted_workers_do_not_see_the_servers_environment(monkeypatch):
    monkeypatch.setenv("TAPEVIZ_SECRET_FOR_TEST", "hunter2")
    config = runner.Config.from_env({"TAPEVIZ_MODE": "hosted"})
    config.warm = 0
    pool = runner.Runner(config)
    try:
        rec = pool.record("import os\nprint(sorted(os.environ))\nprint(os.getcwd())\n",
                          timeout=20)
    finally:
        pool.close()
    assert rec["error"] is None, rec["error"]
    assert "TAPEVIZ_SECRET_FOR_TEST" not in rec["stdout"]
    assert "tapeviz-" in rec["stdout"]      # a fresh temporary working directory


# -- a practitioner's own project: recorded from its folder, with its arguments ----------------

from user_project import (line_of, plain_run, printed_gradients, recorded_gradients,  # noqa: E402
                          write_project)


@pytest.fixture(scope="module")
def project(tmp_path_factory):
    """The project's folder, what `python main.py --lr 0.05 --steps 4` prints, and the two
    recordings of it the tests below check (whole, and --tapes 1:3), by output file: the
    recordings start with the reference run, side by side, and a test waits for its own."""
    folder = write_project(tmp_path_factory.mktemp("project"))
    recordings = {out: cli_started("record", "main.py", *flags, "-o", out, "--timeout", "120",
                                   "--", "--lr", "0.05", "--steps", "4", timeout=300, cwd=folder)
                  for out, flags in (("run.json", []), ("window.json", ["--tapes", "1:3"]))}
    return folder, plain_run(folder, "--lr", "0.05", "--steps", "4"), recordings


def test_a_multi_file_project_runs_as_plain_python_and_is_attributed_to_its_files(project):
    folder, plain, recordings = project
    result = recordings["run.json"]()
    assert result.returncode == 0, result.stderr[-3000:]
    data = json.loads((folder / "run.json").read_text())
    # The same printed output as `python main.py --lr 0.05 --steps 4`, in the recording and
    # on the terminal; argv, __file__, sys.path[0] and the working directory as python sets them.
    assert data["stdout"] == plain and result.stdout == plain
    assert "argv ['main.py', '--lr', '0.05', '--steps', '4'] main __main__ main.py path0 True cwd True" \
        in plain
    assert data["argv"] == ["main.py", "--lr", "0.05", "--steps", "4"]
    # Ops inside the package carry its file and line; the program's own ops carry main.py.
    where = {(op["file"], op["line"], op["type"]) for op in data["ops"]}
    assert ("trainer/model.py", line_of(folder, "trainer/model.py", "tf.matmul"), "MatMul") in where
    assert ("trainer/model.py", line_of(folder, "trainer/model.py", "tf.tanh"), "Tanh") in where
    assert ("trainer/losses.py", line_of(folder, "trainer/losses.py", "tf.square"), "Square") \
        in where
    assert ("main.py", line_of(folder, "main.py", "tf.reduce_sum"), "Sum") in where
    assert {op["file"] for op in data["ops"]} <= {"main.py", "trainer/model.py",
                                                   "trainer/losses.py", "trainer/loop.py"}
    # Tapes in the package and in main.py were instrumented, each at its own file and line.
    loop_tape = line_of(folder, "trainer/loop.py", "GradientTape")
    assert [(t["file"], t["line"]) for t in data["tapes"]] == \
        [("trainer/loop.py", loop_tape)] * 4 + [("main.py", line_of(folder, "main.py", "GradientTape"))]
    call = data["tapes"][0]["gradients"][0]
    assert (call["file"], call["line"]) == ("trainer/loop.py",
                                            line_of(folder, "trainer/loop.py", "tape.gradient"))
    # The gradients of every tape equal plain TensorFlow's, as the plain run printed them.
    assert recorded_gradients(data) == printed_gradients(plain)
    # The page can show each file's source.
    assert data["program"] == "main.py"
    assert data["files"]["trainer/model.py"] == (folder / "trainer/model.py").read_text()


def test_tapes_records_only_the_chosen_top_level_tapes(project):
    folder, plain, recordings = project
    result = recordings["window.json"]()
    assert result.returncode == 0, result.stderr[-3000:]
    data = json.loads((folder / "window.json").read_text())
    assert data["stdout"] == plain          # the skipped steps still ran, unchanged
    assert [t["index"] for t in data["tapes"]] == [1, 2]
    assert recorded_gradients(data) == printed_gradients(plain)[1:3]
    assert data["skipped"]["tapes"] == "1:3"
    assert (data["skipped"]["top_level_tapes"], data["skipped"]["before"],
            data["skipped"]["after"]) == (5, 1, 2)
    first, last = data["ops"][0]["id"], data["ops"][-1]["id"]
    # Nothing of tape 0's step or of the last tape's was recorded.
    assert all(op["file"] != "main.py" or op["line"] != line_of(folder, "main.py", "tf.reduce_sum")
               for op in data["ops"])
    assert last - first + 1 == len(data["ops"])
    assert "ran without instrumentation" in result.stderr


def test_the_programs_own_arguments_after_the_separator_or_after_the_program():
    from tapeviz.__main__ import parse
    args = parse(["record", "main.py", "-o", "run.json", "--timeout", "120", "--", "--lr", "0.05",
                  "-o", "x"])
    assert (args.program, args.output, args.timeout, args.args) == \
        ("main.py", "run.json", 120.0, ["--lr", "0.05", "-o", "x"])
    args = parse(["record", "--tapes", "100:102", "main.py", "--lr", "0.05", "-o", "run.json",
                  "data.txt"])
    assert (args.tapes, args.output, args.args) == ((100, 102), "run.json",
                                                     ["--lr", "0.05", "data.txt"])
    assert parse(["record", "main.py", "--tapes", "7"]).tapes == (7, 8)
    assert parse(["record", "main.py", "--tapes", "7:"]).tapes == (7, None)


def test_bad_record_and_view_usage_exits_2(project):
    folder = project[0]
    before, backwards, port = finished(
        cli_started("record", "--lr", "0.05", "main.py", cwd=folder),
        cli_started("record", "main.py", "--tapes", "3:1", cwd=folder),
        cli_started("view", "run.json", "--port", "soon", cwd=folder))
    assert before.returncode == 2 and "after --" in before.stderr
    assert backwards.returncode == 2 and "0 <= A < B" in backwards.stderr
    assert port.returncode == 2


def test_view_says_clearly_when_a_file_is_not_a_recording(tmp_path):
    (tmp_path / "notes.json").write_text('{"hello": 1}')
    (tmp_path / "broken.json").write_text("{not json")
    notes, broken, missing = finished(
        cli_started("view", str(tmp_path / "notes.json"), "--headless"),
        cli_started("view", str(tmp_path / "broken.json"), "--headless"),
        cli_started("view", str(tmp_path / "missing.json")))
    assert notes.returncode == 2
    assert "notes.json is JSON but not a tapeviz recording" in notes.stderr
    assert broken.returncode == 2 and "not valid JSON" in broken.stderr
    assert missing.returncode == 2


GAN = ROOT / "tests" / "programs" / "keras_gan_train_step.py"


def recorded_both_ways(tmp_path, program, reference_variable, status):
    """Run `program` plainly, and plainly with `reference_variable` set (it runs its
    tf.functions eagerly and saves plain TensorFlow's results there), then record it plainly
    and with --eager: yields (flags, recording dict, reference path) after checking each
    recording's exit status and output against its plain run's."""
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    reference = tmp_path / "reference.npz"
    both_ways = ([], ["--eager"])
    # the four runs side by side: none reads what another writes
    plain, eager_plain, *recordings = finished(
        started([sys.executable, str(program)], cwd=tmp_path, env=env, timeout=300),
        started([sys.executable, str(program)], cwd=tmp_path, timeout=300,
                env=dict(env, **{reference_variable: str(reference)})),
        *(cli_started("record", *flags, str(program), "-o", str(tmp_path / f"run{len(flags)}.json"),
                      "--timeout", "240", timeout=300, cwd=tmp_path) for flags in both_ways))
    assert plain.returncode == eager_plain.returncode == status, plain.stderr[-2000:]
    for flags, expected, result in zip(both_ways, (plain, eager_plain), recordings):
        assert result.returncode == status and result.stdout == expected.stdout, \
            result.stderr[-3000:]
        yield flags, json.loads((tmp_path / f"run{len(flags)}.json").read_text()), reference


def test_fit_with_a_custom_train_step_plainly_and_with_eager(tmp_path):
    """A Keras Model whose train_step runs two optimizers and a nested gradient-penalty tape,
    trained by fit(): plainly recorded, its traced tapes say where they are and why they
    are empty; with --eager, each step's ops and gradients are recorded, the gradients those
    plain TensorFlow computes (the program run eagerly by itself) -- and the program's
    output and exit status stay those of plain Python both ways."""
    for flags, data, reference in recorded_both_ways(tmp_path, GAN, "GAN_EAGER_REFERENCE", 3):
        tapes = data["tapes"]
        # tape, its nested gradient-penalty tape, the generator's tape: per trace or per step
        assert [(t["line"], t["file"]) for t in tapes[:3]] == [
            (48, GAN.name), (38, GAN.name), (55, GAN.name)]
        assert tapes[1]["parent"] == tapes[0]["id"] and tapes[2]["parent"] is None
        if not flags:
            assert not data["eager"] and {t["function"] for t in tapes} == {"one_step_on_data"}
            assert {w["line"] for w in data["warnings"] if w.get("kind") == "traced"} == {
                48, 38, 55}
            continue
        assert data["eager"] and not any(t["function"] for t in tapes)
        assert len(tapes) == 3 * 8, "three tapes per step, 4 batches x 2 epochs"
        values = {t["id"]: t.get("value") for t in data["tensors"]}
        first = [r["grad"] for t in (tapes[0], tapes[2]) for r in t["gradients"][0]["results"]]
        expected_grads = np.load(reference)
        for i, grad in enumerate(first):
            np.testing.assert_allclose(np.array(values[grad]), expected_grads[f"arr_{i}"],
                                       rtol=1e-5, atol=1e-6)


FIT = ROOT / "tests" / "programs" / "keras_fit_default.py"


def test_fit_with_keras_own_train_step_records_its_tape_with_eager(tmp_path):
    """model.compile(); model.fit() with no train_step of the program's: the GradientTape is
    Keras's own. Plainly, it is listed as traced at the fit() line; with --eager, each step's
    ops and gradient call are recorded, the first step's loss and gradients those a plain
    tape.gradient gives for the same weights and batch, every step is summarized, and the
    program's output (the weights after fit) and exit status stay those of plain Python."""
    fit_line = next(i for i, line in enumerate(FIT.read_text().splitlines(), 1)
                    if "model.fit(" in line)
    for flags, data, reference in recorded_both_ways(tmp_path, FIT, "FIT_REFERENCE", 0):
        tapes = data["tapes"]
        assert tapes and all((t["line"], t["file"]) == (fit_line, FIT.name) for t in tapes)
        ops = {op["id"]: op for op in data["ops"]}
        tensors = {t["id"]: t for t in data["tensors"]}
        values = {i: t.get("value") for i, t in tensors.items()}
        call = tapes[0]["gradients"][0]
        expected_arrays = np.load(reference)
        loss, grads = expected_arrays["arr_0"], [expected_arrays[f"arr_{i}"] for i in range(1, 5)]
        assert {"MatMul", "Relu"} <= {ops[i]["type"] for i in tapes[0]["ops"]}
        if not flags:      # the graph Keras traced: its layers' ops and its gradients' shapes
            assert [t["function"] for t in tapes] == ["one_step_on_data"]
            said = [w["message"] for w in data["warnings"] if w.get("kind") == "traced"]
            assert len(said) == 1 and "fit()'s default `train_step`" in said[0]
            assert {ops[i]["traced"] for i in tapes[0]["ops"]} == {"one_step_on_data"}
            assert {ops[i]["scope"] for i in tapes[0]["ops"] if ops[i]["type"] == "MatMul"} == {
                "regressor/dense", "regressor/dense_1"}, "Keras's layer paths, as eagerly"
            assert [tensors[r["grad"]]["shape"] for r in call["results"]] == [
                list(g.shape) for g in grads]
            continue
        assert len(tapes) == len(data["steps"]) == 4 * 2, "one tape per step: 4 batches x 2"
        assert np.isclose(values[call["target"][0]], loss, rtol=1e-5)
        assert np.isclose(data["steps"][0]["target"], loss, rtol=1e-5)
        assert len(call["results"]) == len(grads)
        for result_, grad in zip(call["results"], grads):
            np.testing.assert_allclose(np.array(values[result_["grad"]]), grad,
                                       rtol=1e-5, atol=1e-6)


ACTOR_CRITIC = ROOT / "tests" / "programs" / "actor_critic_cartpole.py"


def test_an_episode_under_one_tape_draws_legibly_at_1600_by_1000(tmp_path):
    """The actor-critic tutorial's shape: one tape around a whole episode of ~100 timesteps.
    Recorded with its output unchanged, then drawn by tapeviz.figure at 1600x1000 as its
    gradient flow: the per-timestep ops fold ("×N") and every folded node and layer box
    carries its name on the picture, the layers named as Keras names them."""
    import tapeviz
    from tapeviz.draw import graph, overview
    from tapeviz.draw.options import View

    out = tmp_path / "episode.json"
    plain, result = finished(
        started([sys.executable, str(ACTOR_CRITIC)], cwd=tmp_path, timeout=300),
        cli_started("record", str(ACTOR_CRITIC), "-o", str(out), "--timeout", "240", timeout=300,
                    cwd=tmp_path))
    assert result.returncode == plain.returncode == 0 and result.stdout == plain.stdout
    lengths = [int(line.split(": ")[1].split()[0]) for line in plain.stdout.splitlines()]
    assert min(lengths) >= 80, "long episodes: the per-timestep structure repeats"
    rec = json.loads(out.read_text())
    tape = rec["tapes"][-1]["id"]
    fig = tapeviz.figure(rec, tape=tape, call=0, width=1600, height=1000)
    drawn = {node: text for trace in fig.data if trace.customdata is not None and trace.text
             for node, text in zip(trace.customdata, trace.text)}
    recording = overview.as_recording(rec)
    G = graph.build(recording, View(tape=tape, call=0, group=graph.opens_grouped(recording)))
    boxes = [n for n, d in G.nodes(data=True) if d.get("kind") in ("repeat", "group")]
    folds = [n for n in boxes if G.nodes[n]["kind"] == "repeat"]
    assert folds and all(f"×{lengths[-1]}" in G.nodes[n]["label"] for n in folds)
    assert {G.nodes[n]["label"] for n in boxes if G.nodes[n]["kind"] == "group"} >= {
        "common", "actor", "critic"}
    unnamed = [G.nodes[n]["label"] for n in boxes if not drawn.get(n)]
    assert not unnamed, f"boxes drawn without their name: {unnamed}"


LONG_LOOP = textwrap.dedent("""
    import tensorflow as tf
    tf.random.set_seed(0)
    x = tf.random.normal([16, 3])
    y = tf.reduce_sum(x * [1.0, -2.0, 0.5], axis=1, keepdims=True)
    w, b = tf.Variable(tf.zeros([3, 1])), tf.Variable(0.0)
    for step in range(1810):
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean((x @ w + b - y) ** 2)
        dw, db = tape.gradient(loss, [w, b])
        w.assign_sub(0.01 * dw)
        b.assign_sub(0.01 * db)
        print(step, loss.numpy())
""").lstrip()


def test_every_step_of_a_long_loop_leaves_its_summary_past_the_op_bound(tmp_path):
    program = write(tmp_path, "loop.py", LONG_LOOP)
    reference = started([sys.executable, str(program)], timeout=300)   # side by side with the worker
    pool = runner.Runner(runner.Config(warm=0))
    try:
        rec = pool.record(LONG_LOOP, filename=str(program), timeout=600,
                          keep_steps=None)       # as `record` does: every step recorded
    finally:
        pool.close()
    printed = [np.float32(line.split()[1]) for line in reference().stdout.splitlines()]
    assert rec["error"] is None and rec["dropped"].get("ops"), "the op bound dropped early steps"
    steps = rec["steps"]
    assert len(printed) == len(steps) == 1810 and "steps" not in rec["dropped"]
    assert [np.float32(s["target"]) for s in steps] == printed
    assert [s["call"] for s in steps] == list(range(1810)) and all(s["scalar"] for s in steps)
    names = [rec["step_sources"][i]["name"] for i in steps[-1]["sources"]]
    assert names == ["w", "b"] and all(len(s["norms"]) == 2 for s in steps)


def test_view_refuses_a_hostile_recording_through_the_gate(tmp_path):
    (tmp_path / "deep.json").write_text("[" * 100_000 + "]" * 100_000)
    (tmp_path / "typed.json").write_text(
        '{"schema": "tapeviz.recording/1", "source": "", "ops": [{"id": "zero"}]}')
    cases = (("deep.json", "nested deeper than any recording"),
             ("typed.json", "field 'id' is not what the recorder writes"))
    results = finished(*(cli_started("view", str(tmp_path / name), "--headless") for name, _ in cases))
    for (name, words), result in zip(cases, results):
        assert result.returncode == 2 and words in result.stderr, result.stderr
        assert "Traceback" not in result.stderr
