"""The command line: `python -m tapeviz record|train ...`."""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from .server import runner

RECORD_HELP = """\
Run a TensorFlow 2 program under tapeviz and write what it recorded as JSON.

The program runs in a separate worker process, exactly as the app runs it: its
`tf.GradientTape`s are instrumented (they behave exactly like TensorFlow's), and
every op, tensor, tape and gradient call is written to the recording (schema
tapeviz.recording/1, described in DESIGN.md). Open the JSON in the app, or read it
with any JSON tool.

exit status: 0 the program finished; 1 it raised or hit its time limit (the JSON
is still written, with "error" set and everything recorded until then); 2 bad
usage (a missing file, a bad option).

TAPEVIZ_MODE=hosted in the environment runs it with the hosted app's limits.
"""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m tapeviz",
        description="tapeviz: a visual debugger for TensorFlow eager execution and GradientTape.")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    commands.required = True
    rec = commands.add_parser("record", help="record a program's tape into JSON",
                              description=RECORD_HELP,
                              formatter_class=argparse.RawDescriptionHelpFormatter)
    rec.add_argument("program", help="the Python file to run, e.g. my_program.py")
    rec.add_argument("-o", "--output", metavar="OUT.json",
                     help="where to write the recording (default: standard output)")
    rec.add_argument("--timeout", type=float, default=None, metavar="SECONDS",
                     help="stop the program after this many seconds (default 30; hosted 20)")
    try:
        from .worker import train_cli
    except ImportError:      # the training command ships with the training page
        train_cli = None
    if train_cli is not None:
        train_cli.add_parser(commands)
    return parser


def record_main(args) -> int:
    path = Path(args.program)
    try:
        source = path.read_text(encoding="utf-8", errors="replace")
    except OSError as e:
        print(f"tapeviz record: cannot read {args.program}: {e.strerror or e}", file=sys.stderr)
        return 2
    if args.timeout is not None and args.timeout <= 0:
        print("tapeviz record: --timeout must be positive", file=sys.stderr)
        return 2
    config = runner.Config.from_env()
    config.warm = 0                      # one run: no spare worker to keep warm
    try:
        pool = runner.Runner(config)
    except runner.SandboxUnavailable as e:   # hosted mode refuses to run unsandboxed
        print(f"tapeviz record: {e}", file=sys.stderr)
        return 2
    try:
        recording = pool.record(source, filename=str(path), timeout=args.timeout)
    finally:
        pool.close()
    text = json.dumps(recording, allow_nan=False)
    if args.output and args.output != "-":
        Path(args.output).write_text(text, encoding="utf-8")
    else:
        sys.stdout.write(text + "\n")
    error = recording.get("error")
    summary = (f"{len(recording['ops'])} ops, {len(recording['tensors'])} tensors, "
               f"{len(recording['tapes'])} tapes")
    if error:
        where = f" at line {error['line']}" if error.get("line") else ""
        print(f"tapeviz record: {error['type']}{where}: {error['message']} ({summary})",
              file=sys.stderr)
        if error.get("hint"):
            print(f"hint: {error['hint']}", file=sys.stderr)
        return 1
    print(f"tapeviz record: ok ({summary})", file=sys.stderr)
    return 0


def main(argv=None) -> int:
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as e:          # argparse exits 2 on bad usage, 0 on --help
        return int(e.code or 0)
    if args.command == "record":
        return record_main(args)
    from .worker import train_cli
    return train_cli.main(args)


if __name__ == "__main__":
    sys.exit(main())
