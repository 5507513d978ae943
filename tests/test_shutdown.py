"""When a recorded program ends, Python's exit steps run as `python PROGRAM.py` runs them:
its threads are waited for, then what it registered with `atexit` runs. The reference is
the same program run by a real interpreter."""
import os
import subprocess
import sys
import textwrap

import pytest

pytest.importorskip("tensorflow")

from tapeviz.server.runner import Config, Runner  # noqa: E402
from tapeviz.worker import recorder  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

HANDLERS = textwrap.dedent("""
    import atexit
    import tensorflow as tf

    @atexit.register
    def report():
        print("last loss", float(tf.reduce_sum(tf.constant([1.0, 2.0]))))

    def broken():
        raise ValueError("a handler that fails")

    def dropped():
        print("never printed: unregistered")

    atexit.register(print, "with arguments", 3, sep="|")
    atexit.register(broken)
    atexit.register(dropped)
    atexit.unregister(dropped)
    print("the program's own line")
    """)

# autograph converts `f` through a generated module in the temp folder, and asks atexit to
# delete it; the program prints where it is
AUTOGRAPH = textwrap.dedent("""
    import sys
    import tensorflow as tf

    @tf.function
    def f(x):
        for _ in tf.range(3):
            x = x + 1.0
        return x

    print(f(tf.constant(1.0)).numpy())
    for name, module in sorted(sys.modules.items()):
        if name.startswith("__autograph_generated_file"):
            print("GENERATED", module.__file__)
    """)


def plain_stdout(source: str, tmp_path) -> str:
    program = tmp_path / "plain.py"
    program.write_text(source)
    env = dict(os.environ, PYTHONPATH=ROOT, TF_CPP_MIN_LOG_LEVEL="3")
    return subprocess.run([sys.executable, str(program)], env=env, capture_output=True,
                          text=True, check=True).stdout


def generated_files(stdout: str) -> list:
    return [line.split(" ", 1)[1] for line in stdout.splitlines() if line.startswith("GENERATED")]


@pytest.mark.slow   # plain Python, the reference, runs as a program of its own
def test_exit_handlers_print_into_the_recording_as_python_prints_them(tmp_path):
    rec = recorder.record(HANDLERS)
    assert rec.error is None
    assert rec.stdout == plain_stdout(HANDLERS, tmp_path)
    assert "last loss 3.0" in rec.stdout and "never printed" not in rec.stdout
    # the handler's op is recorded, at its line
    line = HANDLERS.splitlines().index('    print("last loss", float(tf.reduce_sum(tf.constant([1.0, 2.0]))))') + 1
    assert any(op.type == "Sum" and op.line == line for op in rec.ops)


def test_exit_handlers_run_after_an_exception_and_sys_exit():
    for ending, error in (("raise RuntimeError('boom')", "RuntimeError"),
                          ("raise SystemExit(3)", "SystemExit")):
        rec = recorder.record(f"import atexit\natexit.register(print, 'bye')\n{ending}\n")
        assert rec.stdout == "bye\n"
        assert rec.error.type == error


def test_a_timed_out_program_runs_no_exit_handlers():
    rec = recorder.record("import atexit\natexit.register(print, 'bye')\nwhile True:\n    pass\n",
                          timeout=1)
    assert rec.error.type == "Timeout"
    assert rec.stdout == ""


def test_an_exit_handler_that_runs_past_the_limit_is_a_timeout():
    rec = recorder.record(textwrap.dedent("""
        import atexit
        def forever():
            while True:
                pass
        atexit.register(forever)
        print("done")
        """), timeout=1)
    assert rec.error.type == "Timeout" and rec.error.line in (4, 5)   # in forever's loop
    assert rec.stdout == "done\n"


THREADS = textwrap.dedent("""
    import threading, time
    from concurrent.futures import ThreadPoolExecutor
    import tensorflow as tf

    def later():
        time.sleep(0.3)
        print("from a thread", float(tf.reduce_sum(tf.constant([1.0, 2.0]))))

    def forgotten():
        time.sleep(3)
        print("a daemon thread dies with the program")

    threading.Thread(target=later).start()
    threading.Thread(target=forgotten, daemon=True).start()
    pool = ThreadPoolExecutor(2)           # never shut down: its idle workers stop at exit
    print("from a pool", pool.submit(lambda: 6 * 7).result())
    print("main done")
    """)


@pytest.mark.slow   # plain Python, the reference, runs as a program of its own
def test_the_programs_threads_end_into_the_recording_as_python_waits_for_them(tmp_path):
    rec = recorder.record(THREADS, timeout=60)
    assert rec.error is None
    assert rec.stdout == plain_stdout(THREADS, tmp_path)
    assert "from a thread 3.0" in rec.stdout and "daemon" not in rec.stdout


def test_a_thread_that_outlives_the_limit_is_a_timeout_at_its_line():
    namespace = {}
    source = textwrap.dedent("""
        import threading, time
        stop = False
        def spin():
            while not stop:
                time.sleep(0.02)
        threading.Thread(target=spin).start()
        print("main done")
        """)
    try:
        rec = recorder.record(source, timeout=1, namespace=namespace)
    finally:
        namespace["stop"] = True           # this test's own process must not wait for it
    assert rec.error.type == "Timeout" and rec.error.line in (6, 7)   # in spin's loop
    assert rec.stdout == "main done\n"


def test_the_real_atexit_is_back_after_the_run():
    import atexit
    register = atexit.register
    recorder.record("import atexit\natexit.register(print, 'bye')\n")
    assert atexit.register is register


@pytest.mark.slow   # plain Python, and a Runner's zygote and worker
def test_a_forked_local_worker_leaves_no_autograph_file(tmp_path):
    """Local mode's workers are forks of the zygote and end with os._exit: before, each
    traced function's generated file stayed in the temp folder. A plain run removes it."""
    plain = plain_stdout(AUTOGRAPH, tmp_path)
    assert generated_files(plain) and not any(map(os.path.exists, generated_files(plain)))
    runner = Runner(Config(warm=1))
    try:
        assert runner.zygote is not None
        rec = runner.record(AUTOGRAPH)
    finally:
        runner.close()
    assert rec["error"] is None
    files = generated_files(rec["stdout"])
    assert files
    assert not [f for f in files if os.path.exists(f)]
