"""worker/program.py through the recorder, in-process: a program runs with its own argv,
folder and working directory, its package's tapes are instrumented, and the process is
put back as it was (a second run imports the package afresh and records its tapes too)."""
import os
import sys

import pytest
from user_project import printed_gradients, recorded_gradients, write_project

from tapeviz.worker import recorder


def run(folder, *args):
    main = str(folder / "main.py")
    return recorder.record((folder / "main.py").read_text(), filename=main, timeout=120,
                           program={"argv": ["main.py", *args], "cwd": str(folder),
                                    "path": str(folder)}).to_dict()


def test_a_program_runs_in_its_folder_and_the_process_is_put_back(tmp_path):
    folder = write_project(tmp_path)
    before = (list(sys.argv), list(sys.path), os.getcwd(), sys.modules["__main__"],
              list(sys.meta_path))
    first = run(folder, "--steps", "2")
    after = (list(sys.argv), list(sys.path), os.getcwd(), sys.modules["__main__"],
             list(sys.meta_path))
    assert first["error"] is None, first["error"]
    assert "argv ['main.py', '--steps', '2'] main __main__ main.py path0 True cwd True" \
        in first["stdout"]
    assert after == before
    assert not any(name == "trainer" or name.startswith("trainer.") for name in sys.modules)
    second = run(folder, "--steps", "1", "--lr", "0.5")
    assert second["error"] is None, second["error"]
    for rec in (first, second):
        assert [t["file"] for t in rec["tapes"]][:-1] == ["trainer/loop.py"] * (len(rec["tapes"]) - 1)
        assert recorded_gradients(rec) == printed_gradients(rec["stdout"])
    assert len(second["tapes"]) == 2


ARGPARSE = """import argparse, sys
parser = argparse.ArgumentParser()
parser.add_argument("--lr", type=float, default=0.1)
args = parser.parse_args()
print(sys.argv, args.lr)
"""


@pytest.mark.slow   # plain `python program.py`, the reference, runs as a program of its own
def test_a_typed_program_sees_the_argv_of_python_program_py(tmp_path):
    """The app's programs have no argv of their own: they see what `python program.py` gives
    (the reference, run plainly), not the worker's, which made argparse fail."""
    import subprocess
    (tmp_path / "program.py").write_text(ARGPARSE)
    plain = subprocess.run([sys.executable, "program.py"], cwd=tmp_path, capture_output=True,
                           text=True, check=True).stdout
    argv = list(sys.argv)
    rec = recorder.record(ARGPARSE)
    assert rec.error is None, rec.error
    assert rec.stdout == plain == "['program.py'] 0.1\n"
    assert sys.argv == argv                      # put back
