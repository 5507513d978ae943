"""The command line: `python -m tapeviz record|view|train ...` (also the `tapeviz` command)."""
from __future__ import annotations

import argparse
import contextlib
import json
import re
import os
import sys
import sysconfig
from pathlib import Path

from .matching import cli as compare_cli
from . import live_cli
from .live_output import LiveOutput
from .server import jobs, runner
from .server.hosted import SandboxUnavailable

RECORD_HELP = """\
Run a TensorFlow 2 program under tapeviz and write what it recorded as JSON.

    python -m tapeviz record main.py -o run.json --timeout 120 -- --lr 0.05

runs `python main.py --lr 0.05` in a separate worker process: its folder first on
sys.path, sys.argv set, the current directory yours. Its `tf.GradientTape`s (in
main.py and in every module of your project) are instrumented (they behave
exactly like TensorFlow's), and every op, tensor, tape and gradient call is
written to the recording with its file and line (schema tapeviz.recording/1,
described in DESIGN.md). Open it with `python -m tapeviz view run.json`.

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
                     help=f"stop the program after this many seconds (default {LOCAL_TIMEOUT_S:g} "
                          f"for your own program; hosted 20, or TAPEVIZ_TIMEOUT_S)")
    rec.add_argument("--tapes", metavar="A:B", type=tape_range, default=None,
                     help="record only top-level tapes A to B-1, counted from 0 in the order "
                          "they are entered (100:102 is tapes 100 and 101; 5 is tape 5 alone), "
                          "with the ops up to the next top-level tape; the rest of the program "
                          "runs uninstrumented, at full speed")
    rec.add_argument("--keep-steps", metavar="N", type=positive_int, default=None,
                     help="keep the first N tapes each top-level `with` line opens whole (a "
                          "loop's first N steps, fewer if they fill most of the op bound; "
                          f"default {runner.KEEP_STEPS}), besides its {runner.NEWEST_STEPS} "
                          "newest sampled steps and those with a NaN/Inf, a None gradient or "
                          "an error; its other steps run uninstrumented at close to full "
                          "speed, their losses and gradient norms still in the recording's steps")
    rec.add_argument("--all-steps", action="store_true",
                     help="record every op of every step (slower; a long loop's oldest ops "
                          "give way to the op bound)")
    rec.add_argument("--eager", action="store_true",
                     help="run tf.functions eagerly (tf.config.run_functions_eagerly(True)), "
                          "so the ops and gradients inside model.fit()'s train_step and "
                          "@tf.function steps are recorded one by one, with values")
    rec.add_argument("--live", action="store_true",
                     help="follow the run in the app while it happens: its steps charted live "
                          "from OUT.json (rewritten every half second), Stop on the page ends it "
                          "keeping every step; the app stays open on the finished run until "
                          "Ctrl+C (needs -o)")
    rec.add_argument("--port", type=int, default=8501, help="the app's port with --live (8501)")
    rec.epilog = ("ARGS after -- go to the program, as in `python PROGRAM.py ARGS...`; without "
                  "--, arguments after the program that tapeviz does not know go to it too.")
    view = commands.add_parser("view", help="open a recording in the app",
                               description="Start the tapeviz app showing RUN.json.")
    view.add_argument("recording", metavar="RUN.json", help="a recording made by `record`")
    view.add_argument("--port", type=int, default=8501, help="the app's port (default 8501)")
    view.add_argument("--headless", action="store_true",
                      help="do not open a browser (print the URL only)")
    view.add_argument("--follow", action="store_true",
                      help="chart the file's steps live while a program still writes it "
                           "(tapeviz.keras.Watch(\"run.json\")), then draw it when it ends")
    try:
        from .worker import train_cli
    except ImportError:      # the training command ships with the training page
        train_cli = None
    if train_cli is not None:
        train_cli.add_parser(commands)
    compare_cli.add_parsers(commands)
    return parser


LOCAL_TIMEOUT_S = 600.0    # a practitioner's training script runs at its own pace, not a class's


def tape_range(text: str) -> tuple:
    """"100:102" -> (100, 102); "5" -> (5, 6); "100:" -> (100, None)."""
    start, colon, stop = text.partition(":")
    try:
        a = int(start) if start.strip() else 0
        b = (int(stop) if stop.strip() else None) if colon else a + 1
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not A:B (two whole numbers)") from None
    if a < 0 or (b is not None and b <= a):
        raise argparse.ArgumentTypeError(f"{text!r}: need 0 <= A < B")
    return a, b


def positive_int(text: str) -> int:
    try:
        n = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if n < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: need at least 1")
    return n


def record_main(args) -> int:
    path = Path(args.program)
    try:
        source = path.read_text(encoding="utf-8", errors="replace")
    except OSError as e:
        print(f"tapeviz record: cannot read {args.program}: {e.strerror or e}", file=sys.stderr)
        return 2
    problem = _options_problem(args)
    if problem is not None:
        print(f"tapeviz record: {problem}", file=sys.stderr)
        return 2
    config = runner.Config.from_env()
    config.warm = 0                      # one run: no spare worker to keep warm
    config.zygote = False                # nor a zygote: it would import TF just as a worker does
    if args.timeout is None and not config.hosted and "TAPEVIZ_TIMEOUT_S" not in os.environ:
        args.timeout = LOCAL_TIMEOUT_S
    try:
        pool = runner.Runner(config)
    except SandboxUnavailable as e:   # hosted mode refuses to run unsandboxed
        print(f"tapeviz record: {e}", file=sys.stderr)
        return 2
    to_file = bool(args.output and args.output != "-")
    # The program's output goes to this terminal as it is written, all of it (the
    # recording keeps the newest part); its stdout only with -o, since otherwise stdout is
    # the JSON. Local mode: a hosted worker's sandbox cannot reach the pipes.
    live = None if config.hosted else LiveOutput()
    app = None
    try:
        try:
            if args.live:
                app = _live_app(args)
                if app is None:
                    return 2
            recording = _record_with(pool, args, path, source, live, to_file)
        finally:
            pool.close()
        _write_recording(args, recording, to_file, live)
        status = told(recording)
        if app is not None:
            live_cli.stay_open(app, args.port)
        return status
    finally:
        if app is not None:               # whatever ended this command ends its app
            live_cli.stop_app(app)


def _live_app(args):
    """`--live`: the app, started on the file the run rewrites (live_cli.py)."""
    app = app_path()
    if app is None:
        print("tapeviz record: the app (app.py) is not installed beside the package",
              file=sys.stderr)
        return None
    started = live_cli.start_app(Path(args.output), args.port, app)
    print(f"tapeviz record: follow the run live at http://localhost:{args.port}", file=sys.stderr)
    return started


def _options_problem(args):
    """What is wrong with `record`'s options together, or None."""
    if args.tapes and args.keep_steps:
        return "--tapes and --keep-steps both choose the tapes to record; give one"
    if args.all_steps and args.keep_steps:
        return "--all-steps records every step and --keep-steps some of them; give one"
    if args.timeout is not None and args.timeout <= 0:
        return "--timeout must be positive"
    if args.live and (not args.output or args.output == "-"):
        return "--live needs -o RUN.json: the file the app follows while the program runs"
    return None


def _record_with(pool, args, path: Path, source: str, live, to_file: bool) -> dict:
    """The program recorded by a worker of `pool`, as `python PROGRAM.py ARGS` would run it
    here, its output live on this terminal when `live`."""
    program = {"argv": [args.program, *args.args], "cwd": os.getcwd(),
               "path": str(path.resolve().parent)}
    with live or contextlib.nullcontext():
        if live is not None:
            program["terminal"] = {k: v for k, v in live.paths.items()
                                   if k == "stderr" or to_file}
        if getattr(args, "live", False):
            spec = jobs.Record(source, str(path.resolve()), args.timeout, program,
                               tuple(args.tapes) if args.tapes else None, args.eager,
                               kept_steps(args))
            file = live_cli.LiveFile(Path(args.output), source, path.name)
            return live_cli.follow(pool, spec, file)
        return pool.record(source, filename=str(path.resolve()), timeout=args.timeout,
                           program=program, tapes=args.tapes,
                           eager=args.eager, keep_steps=kept_steps(args))


def kept_steps(args):
    """The first steps of each loop `record` keeps whole (None: every op of every step)."""
    return None if args.all_steps else args.keep_steps or runner.KEEP_STEPS


def _write_recording(args, recording: dict, to_file: bool, live) -> None:
    """The JSON to -o or stdout; hosted, the output the recording kept."""
    text = json.dumps(recording, allow_nan=False)
    if to_file:
        Path(args.output).write_text(text, encoding="utf-8")
        if live is None:     # hosted: what the recording kept is all there is to show
            sys.stdout.write(recording.get("stdout") or "")
            sys.stdout.flush()
    else:
        sys.stdout.write(text + "\n")
    if live is None:
        sys.stderr.write(recording.get("stderr") or "")
        sys.stderr.flush()


def told(recording: dict) -> int:
    """Say on stderr how the recorded run went; the exit status `record` ends with."""
    for warning in recording.get("warnings") or []:   # data served from a local copy
        if warning.get("kind") == "data":
            print(f"tapeviz record: {warning.get('message')}", file=sys.stderr)
    error = recording.get("error")
    summary = _summary(recording)
    if error:
        where = ""
        if error.get("line"):
            where = f" at {error['file']} line {error['line']}" if error.get("file") \
                else f" at line {error['line']}"
        print(f"tapeviz record: {error['type']}{where}: {error['message']} ({summary})",
              file=sys.stderr)
        if error.get("hint"):
            print(f"hint: {error['hint']}", file=sys.stderr)
        return program_status(error)
    print(f"tapeviz record: ok ({summary})", file=sys.stderr)
    return 0


def _summary(recording: dict) -> str:
    """"12 ops, 30 tensors, 1 tapes", and what the recording left out or cut."""
    summary = (f"{len(recording['ops'])} ops, {len(recording['tensors'])} tensors, "
               f"{len(recording['tapes'])} tapes")
    if recording.get("skipped"):
        summary += f"; {recording['skipped'].get('note', recording['skipped'])}"
    if recording.get("dropped"):
        summary += "; dropped by the recording's bounds: " + ", ".join(
            f"{n:,} {what}" for what, n in recording["dropped"].items())
    cut = [name for name in ("stdout", "stderr")
           if str(recording.get(name) or "").startswith("[... ")]
    if cut:
        summary += f"; the recording keeps the newest part of its {' and '.join(cut)}"
    return summary


_EXIT_CODE = re.compile(r"(?:the program ended with os\._exit\()?(-?\d+)\)?")


def program_status(error: dict) -> int:
    """The status `python PROGRAM.py` would have ended with: sys.exit(n) and os._exit(n)
    give n (as the OS keeps it, 0-255); anything else that failed gives 1."""
    if error.get("type") == "SystemExit":
        code = _EXIT_CODE.fullmatch(str(error.get("message", "")).strip())
        if code is not None:
            return int(code.group(1)) & 0xFF or 1
    return 1


def view_main(args) -> int:
    """Check that the file is a recording, then run the app on it (the process becomes it)."""
    from . import recording_gate as gate     # no TensorFlow, no Streamlit
    path = Path(args.recording)
    try:
        if not (args.follow and not path.exists()):   # followed: the program may write it later
            gate.read(path.read_bytes(), path.name)
    except OSError as e:
        print(f"tapeviz view: cannot read {args.recording}: {e.strerror or e}", file=sys.stderr)
        return 2
    except gate.Unreadable as e:
        print(f"tapeviz view: {e}", file=sys.stderr)
        return 2
    app = app_path()
    if app is None:
        print("tapeviz view: the app (app.py) is not installed beside the package",
              file=sys.stderr)
        return 2
    env = live_cli.app_env(path, follow=args.follow)
    # Not headless, Streamlit opens a browser, and on its first run asks for an e-mail on
    # stdin: only where someone can answer (a terminal), or it would wait forever.
    headless = args.headless or not sys.stdin.isatty()
    command = [sys.executable, "-m", "streamlit", "run", str(app), "--server.port",
               str(args.port), "--server.headless", "true" if headless else "false"]
    print(f"tapeviz view: {args.recording} at http://localhost:{args.port}", file=sys.stderr)
    os.chdir(app.parent)             # its .streamlit/config.toml: the app's theme and limits
    os.execve(sys.executable, command, env)
    return 0    # not reached


def app_path():
    """app.py: beside the package in a checkout, or where `pip install .` put it."""
    for root in (Path(__file__).resolve().parent.parent,
                 Path(sysconfig.get_path("data")) / "share" / "tapeviz"):
        if (root / "app.py").is_file():
            return root / "app.py"
    return None


def parse(argv: list):
    """The command's arguments; for `record`, `args.args` are the program's own: those after
    `--`, else those after the program that are not tapeviz's (said on stderr).
    Raises SystemExit on bad usage, as argparse does."""
    program_args = None
    if argv[:1] == ["record"] and "--" in argv:      # what follows -- is the program's
        cut = argv.index("--")
        argv, program_args = argv[:cut], argv[cut + 1:]
    parser = build_parser()
    args, extra = parser.parse_known_args(argv)
    if args.command != "record" or program_args is not None:
        if extra:
            parser.error(f"unrecognized arguments: {' '.join(extra)}")
        args.args = program_args or []
        return args
    after = argv[argv.index(args.program) + 1:] if args.program in argv else []
    if any(a not in after for a in extra):
        parser.error(f"unrecognized arguments: {' '.join(extra)} (the program's own arguments "
                     f"go after it, best after --: record main.py -o run.json -- --lr 0.05)")
    if extra:
        print(f"tapeviz record: passing {' '.join(extra)} to {args.program} (put the "
              f"program's arguments after -- to make sure tapeviz takes none of them)",
              file=sys.stderr)
    args.args = extra
    return args


def main(argv=None) -> int:
    try:
        args = parse(list(sys.argv[1:] if argv is None else argv))
    except SystemExit as e:          # argparse exits 2 on bad usage, 0 on --help
        return int(e.code or 0)
    if args.command == "record":
        return record_main(args)
    if args.command == "view":
        return view_main(args)
    if args.command in compare_cli.COMMANDS:
        return compare_cli.main(args)
    from .worker import train_cli
    return train_cli.main(args)


def run() -> None:
    """The `tapeviz` console command (pyproject.toml)."""
    sys.exit(main())


if __name__ == "__main__":
    run()
