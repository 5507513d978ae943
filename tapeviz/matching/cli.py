"""`tapeviz diff A.json B.json` and `tapeviz export --model-explorer RUN.json`: the compare
room on the command line. diff exits 0 when the runs match within --rtol, 1 when they differ,
2 for bad usage, so a CI job can run it."""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from .. import recording_gate as gate
from ..words import compare as words
from . import match, model_explorer, steps

COMMANDS = ("diff", "export")

DIFF_HELP = """\
Match two recordings op by op (by tape, the line as written, op type and order) and print
where they first part and a summary.

    tapeviz diff before.json after.json           # an edit, two seeds, eager vs tf.function
    tapeviz diff run.json --step 398:399          # two kept steps of one run

exit status: 0 they match within --rtol; 1 they differ (an op on one side only, a NaN,
Inf or None on one side, or a value or gradient past --rtol); 2 bad usage.
"""


def add_parsers(commands) -> None:
    diff = commands.add_parser("diff", help="compare two recordings op by op",
                               description=DIFF_HELP, formatter_class=argparse.RawDescriptionHelpFormatter)
    diff.add_argument("a", metavar="A.json", help="a recording made by `record`")
    diff.add_argument("b", metavar="B.json", nargs="?", default=None,
                      help="the other recording (default: A again, with --step I:J)")
    diff.add_argument("--rtol", type=float, default=match.RTOL, metavar="R",
                      help=f"the relative difference two values may have and still match (default {match.RTOL:g})")
    diff.add_argument("--step", metavar="I[:J]", type=step_pair, default=None,
                      help="compare kept step I of A with step J of B (each a top-level tape with "
                           "its update; from 0, negative from the end); I alone: step I of both")
    diff.add_argument("--json", action="store_true", help="print the matched rows as JSON instead")
    export = commands.add_parser("export", help="write a recording in another tool's format",
                                 description="Write a recording as Model Explorer's JSON graph "
                                             "(layers as namespaces), with node data of value and "
                                             "gradient norms beside it.")
    export.add_argument("recording", metavar="RUN.json")
    export.add_argument("--model-explorer", action="store_true", required=True,
                        help="Model Explorer's graph JSON (the one format for now)")
    export.add_argument("-o", "--output", metavar="GRAPH.json", required=True)
    export.add_argument("--step", type=int, default=None, metavar="N", help="only kept step N")


def step_pair(text: str) -> tuple:
    """"3" -> (3, 3); "0:1" -> (0, 1); "-2:-1" the last two."""
    first, colon, second = text.partition(":")
    try:
        i = int(first)
        j = int(second) if colon else i
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not I or I:J (whole numbers)") from None
    return i, j


def main(args) -> int:
    return diff_main(args) if args.command == "diff" else export_main(args)


def _read(path: str, command: str):
    """A recording through the gate, or None after saying why on stderr."""
    try:
        return gate.read(Path(path).read_bytes(), Path(path).name).recording
    except OSError as e:
        print(f"tapeviz {command}: cannot read {path}: {e.strerror or e}", file=sys.stderr)
    except gate.Unreadable as e:
        print(f"tapeviz {command}: {e}", file=sys.stderr)
    return None


def diff_main(args) -> int:
    if args.b is None and args.step is None:
        print("tapeviz diff: give two recordings, or one with --step I:J", file=sys.stderr)
        return 2
    if not args.rtol >= 0:
        print("tapeviz diff: --rtol must be 0 or more", file=sys.stderr)
        return 2
    a = _read(args.a, "diff")
    b = a if args.b is None else _read(args.b, "diff")
    if a is None or b is None:
        return 2
    step_a, step_b = args.step if args.step is not None else (None, None)
    try:
        cmp = match.compare(a, b, rtol=args.rtol, step_a=step_a, step_b=step_b)
    except steps.NoSuchStep as e:
        print(f"tapeviz diff: {e}", file=sys.stderr)
        return 2
    names = words.side_names(cmp.step_a, cmp.step_b, same_file=args.b is None or args.a == args.b)
    if args.json:
        print(json.dumps({"differ": cmp.differ, "sentence": words.divergence(cmp, names),
                          "first": cmp.first, "rows": [r.as_dict() for r in cmp.rows],
                          "gradients": [g.as_dict() for g in cmp.gradients]}, default=str))
    else:
        print(words.divergence(cmp, names))
        for line in words.first_lines(cmp, names) + words.summary(cmp, names):
            print("  " + line)
    return 1 if cmp.differ else 0


def export_main(args) -> int:
    rec = _read(args.recording, "export")
    if rec is None:
        return 2
    try:
        collection = model_explorer.graph(rec, args.step, label=rec.program or Path(args.recording).stem)
    except steps.NoSuchStep as e:
        print(f"tapeviz export: {e}", file=sys.stderr)
        return 2
    out = Path(args.output)
    out.write_text(json.dumps(collection), encoding="utf-8")
    written = [str(out)]
    for kind in ("value", "gradient"):
        data = model_explorer.node_data(collection, rec, args.step, kind)
        beside = out.with_name(f"{out.stem}.{kind}_norms.json")
        beside.write_text(json.dumps(data), encoding="utf-8")
        written.append(str(beside))
    nodes = len(collection["graphs"][0]["nodes"])
    print(f"tapeviz export: {nodes} nodes to {written[0]}; node data (norms of values and of "
          f"gradients) in {written[1]} and {written[2]}", file=sys.stderr)
    return 0
