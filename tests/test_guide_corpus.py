"""Programs in the style of TensorFlow's guides (tests/corpus/), each run plainly
(`python prog.py`) and recorded (`python -m tapeviz record`): the same printed output and
exit status, at least one tape, and the gradients the program printed as `grad NAME: value`
equal to gradients in the recording."""
import json
import os
import re
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest

pytestmark = pytest.mark.slow   # each program runs plainly and recorded, a Python each

ROOT = Path(__file__).resolve().parent.parent
CORPUS = sorted((ROOT / "tests" / "corpus").glob("*.py"))
GRAD_LINE = re.compile(r"^grad [\w]+: (.+)$", re.M)
TIMEOUT_S = 600            # one program under a busy machine; each stays well under it


def _plain(path: Path, workdir: Path):
    done = subprocess.run([sys.executable, str(path)], capture_output=True, text=True,
                          cwd=workdir, timeout=TIMEOUT_S,
                          env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2"))
    return done.returncode, done.stdout


def _recorded(path: Path, out: Path):
    done = subprocess.run([sys.executable, "-m", "tapeviz", "record", str(path), "-o", str(out),
                           "--timeout", str(TIMEOUT_S - 60)],
                          capture_output=True, text=True, cwd=ROOT, timeout=TIMEOUT_S,
                          env=dict(os.environ, PYTHONPATH=str(ROOT)))
    assert out.exists(), done.stderr
    return done.returncode, json.loads(out.read_text()), done.stderr


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """Every corpus program, plainly and recorded; two processes at a time (2 cores)."""
    base = tmp_path_factory.mktemp("corpus")
    with ThreadPoolExecutor(max_workers=2) as pool:
        plain = {p.name: pool.submit(_plain, p, base) for p in CORPUS}
        recorded = {p.name: pool.submit(_recorded, p, base / (p.stem + ".json"))
                    for p in CORPUS}
        return {name: (plain[name].result(), recorded[name].result()) for name in plain}


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
    (plain_status, plain_out), (status, recording, stderr) = runs[name]
    assert recording["stdout"] == plain_out, stderr
    assert status == plain_status, (recording["error"], stderr)
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
    _, (_, recording, _) = runs["none_and_zero.py"]
    reasons = "\n".join(_none_reasons(recording))
    assert "np.mean(x2, axis=0)" in reasons
    assert "x1.assign_add(x0)" in reasons and "stateful" in reasons
    assert "replaced" in reasons          # x = x + 1 made the variable a tensor
    assert "int32" in reasons
    _, (_, recording, _) = runs["reset_and_stop.py"]
    reasons = "\n".join(_none_reasons(recording))
    assert "`y` was used while recording was stopped at line 9" in reasons
    assert "reset() (line 17)" in reasons


def test_corpus_keeps_what_a_program_ending_in_os_exit_recorded(runs):
    _, (status, recording, _) = runs["exits_early.py"]
    assert status == 0 and recording["error"] is None
    assert recording["stdout"] == "grad sqrt: 0.25\n"
    assert len(recording["tapes"]) == 1 and recording["tapes"][0]["gradients"]


def test_a_native_crash_keeps_what_the_program_printed():
    from tapeviz.server import runner
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
