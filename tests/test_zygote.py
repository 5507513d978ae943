"""Local mode forks workers from a zygote that has imported TensorFlow: every job must
still start from a process no earlier job has touched, as a freshly started interpreter
would (the reference), and a worker's death must still be described."""
import os
import signal
import subprocess
import sys
import textwrap

import pytest

pytest.importorskip("tensorflow")

from tapeviz.server.runner import Config, Runner  # noqa: E402

pytestmark = pytest.mark.slow   # a Runner's zygote and its forked workers

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

MUTATE = textwrap.dedent("""
    import os, random, sys
    import numpy as np
    import tensorflow as tf
    tf.keras.layers.Dense(1)
    tf.tapeviz_mark = 1
    os.environ["TAPEVIZ_MARK"] = "1"
    sys.modules["tapeviz_mark"] = tf
    tf.random.set_seed(5)
    tf.config.run_functions_eagerly(True)
    print(os.getpid(), random.random(), np.random.random())
    """)

OBSERVE = textwrap.dedent("""
    import os, sys
    import tensorflow as tf
    print(hasattr(tf, "tapeviz_mark"), os.environ.get("TAPEVIZ_MARK"),
          "tapeviz_mark" in sys.modules, tf.keras.layers.Dense(1).name,
          tf.config.functions_run_eagerly())
    """)


@pytest.fixture(scope="module")
def runner():
    r = Runner(Config(warm=1))
    assert r.zygote is not None
    yield r
    r.close()


def fresh_interpreter(source: str) -> str:
    env = dict(os.environ, PYTHONPATH=ROOT, TF_CPP_MIN_LOG_LEVEL="3")
    return subprocess.run([sys.executable, "-c", source], env=env, capture_output=True,
                          text=True, check=True).stdout


def test_a_job_sees_none_of_the_previous_jobs_global_state(runner):
    first = runner.record(MUTATE)
    second = runner.record(MUTATE)
    assert first["error"] is None and second["error"] is None
    pid1, py1, np1 = first["stdout"].split()
    pid2, py2, np2 = second["stdout"].split()
    assert pid1 != pid2                                  # one process per job
    assert (py1, np1) != (py2, np2)                      # seeded afresh, as a new process is
    observed = runner.record(OBSERVE)
    assert observed["error"] is None
    assert observed["stdout"] == fresh_interpreter(OBSERVE)
    assert observed["stdout"].split()[:3] == ["False", "None", "False"]


def test_a_worker_killed_by_a_signal_is_described(runner):
    rec = runner.record("import os, signal\nos.kill(os.getpid(), signal.SIGKILL)\n")
    assert rec["error"]["type"] == "WorkerCrash"
    assert "SIGKILL" in rec["error"]["message"]
    assert runner.record("print(1 + 1)")["stdout"] == "2\n"


def test_a_dead_zygote_is_replaced(runner):
    old = runner.zygote
    runner.workers.fill()
    os.kill(old.proc.pid, signal.SIGKILL)
    old.proc.wait(10)
    # the idle worker it forked before dying still runs; the next one needs a new zygote
    assert runner.record("print(2 + 2)")["stdout"] == "4\n"
    assert runner.record("print(3 + 3)")["stdout"] == "6\n"
    assert runner.zygote is not old and runner.zygote.alive
