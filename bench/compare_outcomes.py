"""The judge of an invisible recorder: a unittest/absltest file's per-test outcomes, run
plainly and under `python -m tapeviz record`, must be the same.

Runs `python TEST.py --xml_output_file=plain.xml` and `python -m tapeviz record TEST.py
-- --xml_output_file=recorded.xml` one after the other (never at once: a shared machine),
reads both reports, and prints the counts of each outcome and every test whose outcome
differs, with the recorded failure's first line. Exit status 1 when any differs.

    python bench/compare_outcomes.py path/to/backprop_test.py [--timeout 1800] [--keep DIR]

TensorFlow's own autodiff tests (eager/backprop_test.py, forwardprop_test.py, ...) are the
intended input; they are not in the wheel, so fetch them from TensorFlow's repository at
the installed version. Tests that count every Python object in the process
(`assert_no_new_pyobjects_executing_eagerly`) are expected to differ: tapeviz's records
live there by design.
"""
import argparse
import os
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def outcomes(report: Path) -> dict:
    """test name -> (outcome, first line of its failure)."""
    out = {}
    for case in ET.parse(report).getroot().iter("testcase"):
        name = f"{case.get('classname')}.{case.get('name')}"
        problems = [c for c in case if c.tag in ("failure", "error", "skipped")]
        if problems:
            text = problems[0].get("message") or problems[0].text or ""
            out[name] = (problems[0].tag, text.strip().splitlines()[0][:200] if text.strip() else "")
        else:
            out[name] = ("skipped" if case.get("result") == "suppressed" else "pass", "")
    return out


def run(cmd: list, report: Path, timeout: float) -> None:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p), TF_CPP_MIN_LOG_LEVEL="2")
    subprocess.run(cmd + [f"--xml_output_file={report}"], env=env, timeout=timeout,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    if not report.exists():
        sys.exit(f"no report from: {' '.join(cmd)}")


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("test_file")
    p.add_argument("--timeout", type=float, default=1800)
    p.add_argument("--keep", help="a folder for the two XML reports and the recording")
    args = p.parse_args()
    test = str(Path(args.test_file).resolve())
    where = Path(args.keep or tempfile.mkdtemp(prefix="outcomes-"))
    where.mkdir(parents=True, exist_ok=True)
    plain_xml, recorded_xml = where / "plain.xml", where / "recorded.xml"
    run([sys.executable, test], plain_xml, args.timeout)
    run([sys.executable, "-m", "tapeviz", "record", test, "-o", str(where / "recording.json"),
         "--timeout", str(args.timeout), "--"], recorded_xml, args.timeout + 120)
    plain, recorded = outcomes(plain_xml), outcomes(recorded_xml)
    names = sorted(set(plain) | set(recorded))
    print("plain:   ", dict(Counter(o for o, _ in plain.values())))
    print("recorded:", dict(Counter(o for o, _ in recorded.values())))
    differ = [n for n in names if plain.get(n, ("absent",))[0] != recorded.get(n, ("absent",))[0]]
    print(f"{len(differ)} of {len(names)} tests differ")
    for n in differ:
        print(f"  {n}: plain {plain.get(n, ('absent',))[0]}, recorded "
              f"{recorded.get(n, ('absent',))[0]}  {recorded.get(n, ('', ''))[1]!r}")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
