"""tests/conftest.py keeps the fast tier honest: an unmarked test that starts a process
fails and says to mark it slow, however it starts one; a marked one runs as it would.

Run on a small suite in a folder of its own, with this suite's conftest and pytest.ini, by
a pytest of its own (so the hook of this process does not watch the inner tests)."""
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow   # a pytest of its own, whose tests start processes

ROOT = Path(__file__).resolve().parents[1]

SUITE = textwrap.dedent("""
    import os, subprocess, sys, threading
    import pytest

    def test_pure():
        assert sorted([2, 1]) == [1, 2]

    def test_runs_python():
        subprocess.run([sys.executable, "-c", "pass"])

    def test_catches_the_refusal():
        try:
            subprocess.run(["true"])
        except RuntimeError:
            pass

    def test_starts_from_a_thread_that_swallows_it():
        def start():
            try:
                subprocess.Popen(["true"]).wait()
            except RuntimeError:
                pass
        thread = threading.Thread(target=start)
        thread.start()
        thread.join()

    def test_os_system():
        os.system("true")

    def test_forks_without_a_new_program():
        pid = os.fork()
        if pid == 0:
            os._exit(7)
        assert os.WEXITSTATUS(os.waitpid(pid, 0)[1]) == 7

    @pytest.fixture(scope="module")
    def server():
        proc = subprocess.Popen(["sleep", "30"])
        yield proc
        proc.kill()

    def test_with_a_server(server):
        pass

    @pytest.mark.slow
    def test_marked_slow_runs_python():
        done = subprocess.run([sys.executable, "-c", "print(6 * 7)"], capture_output=True,
                              text=True)
        assert done.stdout == "42\\n"
    """)


def run_suite(tmp_path, *args):
    shutil.copy(ROOT / "pytest.ini", tmp_path / "pytest.ini")
    (tmp_path / "tests").mkdir()
    shutil.copy(ROOT / "tests" / "conftest.py", tmp_path / "tests" / "conftest.py")
    (tmp_path / "tests" / "test_suite.py").write_text(SUITE)
    done = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-rA",
                           *args], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    outcomes = {}
    for line in done.stdout.splitlines():
        word, _, rest = line.partition(" ")
        if word in ("PASSED", "FAILED", "ERROR") and "::" in rest:
            outcomes[rest.split("::")[1].split(" ")[0]] = word
    return done.stdout, outcomes


def test_an_unmarked_test_that_starts_a_process_fails_saying_to_mark_it(tmp_path):
    out, outcomes = run_suite(tmp_path)
    assert outcomes == {
        "test_pure": "PASSED",
        "test_runs_python": "FAILED",
        "test_catches_the_refusal": "FAILED",
        "test_starts_from_a_thread_that_swallows_it": "FAILED",
        "test_os_system": "FAILED",
        "test_forks_without_a_new_program": "PASSED",
        "test_with_a_server": "ERROR",          # its fixture's setup started the process
        "test_marked_slow_runs_python": "PASSED",
    }, out
    assert out.count("mark the test @pytest.mark.slow") >= 5, out
    assert f"started {sys.executable!r} (subprocess.Popen)" in out
    assert "started 'true' (os.system)" in out


def test_the_fast_tier_leaves_out_the_marked_tests(tmp_path):
    out, outcomes = run_suite(tmp_path, "-m", "not slow", "--strict-markers")
    assert "test_marked_slow_runs_python" not in outcomes and "1 deselected" in out, out
    assert outcomes["test_pure"] == "PASSED" and outcomes["test_runs_python"] == "FAILED"
