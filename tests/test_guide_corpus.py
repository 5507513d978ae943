"""Programs in the style of TensorFlow's guides (tests/corpus/), each run plainly (as
`python prog.py`) and recorded (as `python -m tapeviz record` records it; tests/test_cli.py
runs the command itself): the same printed output and exit status, at least one tape, and
the gradients the program printed as `grad NAME: value` equal to gradients in the recording."""
import json
import re
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest

from plain_runs import each_plainly
from tapeviz.__main__ import program_status
from tapeviz.server import runner

pytestmark = pytest.mark.slow   # each program runs plainly and recorded, in forks of two Pythons

ROOT = Path(__file__).resolve().parent.parent
CORPUS = sorted((ROOT / "tests" / "corpus").glob("*.py"))
GRAD_LINE = re.compile(r"^grad [\w]+: (.+)$", re.M)
TIMEOUT_S = 600            # one program under a busy machine; each stays well under it


def _recorded(pool, path: Path) -> tuple:
    """The program recorded as `python -m tapeviz record PROGRAM.py` records it (argv, cwd,
    its folder on sys.path), by a local Runner whose workers fork from one TensorFlow import:
    (the status the command exits with, the recording)."""
    program = {"argv": [str(path)], "cwd": str(ROOT), "path": str(path.parent)}
    recording = pool.record(path.read_text(), filename=str(path), timeout=TIMEOUT_S - 60, program=program)
    error = recording["error"]
    return (program_status(error) if error else 0), recording


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """Every corpus program, plainly and recorded, two at a time (2 cores): the plain runs
    fork from one Python, the recordings from one zygote, so TensorFlow is imported twice,
    not once a program each way."""
    base = tmp_path_factory.mktemp("corpus")
    pool = runner.Runner(runner.Config(warm=0, zygote=True))
    try:
        with ThreadPoolExecutor(max_workers=3) as threads:
            plain = threads.submit(each_plainly, CORPUS, base, tmp_path_factory.mktemp("out"), TIMEOUT_S * 2)
            recorded = {p.name: threads.submit(_recorded, pool, p) for p in CORPUS}
            plain = plain.result()
            return {name: (plain[name], recorded[name].result()) for name in plain}
    finally:
        pool.close()


def _gradient_values(recording: dict) -> list:
    tensors = {t["id"]: t for t in recording["tensors"]}
    values = []
    for tape in recording["tapes"]:
        for call in tape["gradients"]:
            for result in call["results"]:
                grad = tensors.get(result["grad"])
                if grad is not None and grad.get("value") is not None:
                    values.append(np.asarray(grad["value"], dtype=np.float64))
    return values


def _none_reasons(recording: dict) -> list:
    return [r["none_reason"] for tape in recording["tapes"] for call in tape["gradients"]
            for r in call["results"] if r["grad"] is None]


@pytest.mark.parametrize("name", [p.name for p in CORPUS])
def test_corpus_program_prints_and_exits_as_it_does_plainly(runs, name):
    (plain_status, plain_out), (status, recording) = runs[name]
    assert recording["stdout"] == plain_out, recording["error"]
    assert status == plain_status, recording["error"]
    assert recording["tapes"], f"no tape recorded; warnings: {recording['warnings']}"
    json.dumps(recording, allow_nan=False)
    printed = GRAD_LINE.findall(plain_out)
    assert printed or "grad " not in plain_out
    recorded = _gradient_values(recording)
    for text in printed:
        value = np.asarray(json.loads(text), dtype=np.float64)
        assert any(r.shape == value.shape and np.array_equal(r, value) for r in recorded), \
            f"printed gradient {text} is not in the recording"


def test_corpus_none_reasons_name_the_cause(runs):
    _, (_, recording) = runs["none_and_zero.py"]
    reasons = "\n".join(_none_reasons(recording))
    assert "np.mean(x2, axis=0)" in reasons
    assert "x1.assign_add(x0)" in reasons and "stateful" in reasons
    assert "replaced" in reasons          # x = x + 1 made the variable a tensor
    assert "int32" in reasons
    _, (_, recording) = runs["reset_and_stop.py"]
    reasons = "\n".join(_none_reasons(recording))
    assert "`y` was used while recording was stopped at line 9" in reasons
    assert "reset() (line 17)" in reasons


def test_corpus_keeps_what_a_program_ending_in_os_exit_recorded(runs):
    _, (status, recording) = runs["exits_early.py"]
    assert status == 0 and recording["error"] is None
    assert recording["stdout"] == "grad sqrt: 0.25\n"
    assert len(recording["tapes"]) == 1 and recording["tapes"][0]["gradients"]


def test_a_native_crash_keeps_what_the_program_printed():
    pool = runner.Runner(runner.Config(warm=0))
    try:
        rec = pool.record("import ctypes, sys\nimport tensorflow as tf\n"
                          "print('before', tf.constant(2.0).numpy())\n"
                          "print('flushed', end='')\nsys.stdout.flush()\n"
                          "ctypes.string_at(0)\n", timeout=120)
    finally:
        pool.close()
    assert rec["error"]["type"] == "WorkerCrash" and "SIGSEGV" in rec["error"]["message"]
    assert rec["stdout"] == "before 2.0\nflushed"
