"""`python -m tapeviz record` and the runner behind it, through real worker processes."""
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tapeviz.server import runner

ROOT = Path(__file__).resolve().parent.parent


def cli(*args, timeout=180):
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.run([sys.executable, "-m", "tapeviz", *args], capture_output=True,
                          text=True, cwd=ROOT, env=env, timeout=timeout)


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
    assert cli("record", str(tmp_path / "missing.py")).returncode == 2
    assert cli("record").returncode == 2
    assert cli("record", __file__, "--timeout", "soon").returncode == 2
    help_text = cli("record", "--help")
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
