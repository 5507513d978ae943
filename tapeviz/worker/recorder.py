"""Worker side: run a user's program under TensorFlow's op callbacks and an instrumented
GradientTape, and return a Recording. Imports TensorFlow; only a worker process (or the
command line, or tests) may import this module.
"""
from __future__ import annotations

import builtins
import contextlib
import io
import linecache
import os
import re
import signal
import sys
import threading
import time
import traceback
from collections import deque
from typing import Optional

import tensorflow as tf  # noqa: E402

from ..words import hints  # noqa: E402
from .capture import DEFAULT_MAX_OPS, Session  # noqa: E402
from . import active, autograd, exits, heap, native_output, shutdown, terminal, watchdog  # noqa: E402
from .step_stream import streamed_steps  # noqa: E402
from .datasets import mnist_served  # noqa: E402
from .instrumented import adopt_tapes, make_tape_class  # noqa: E402
from .program import ProgramEnv  # noqa: E402
from .user_import import make_import  # noqa: E402
from .keep import Keep  # noqa: E402
from .window import TapeWindow  # noqa: E402
from ..recording import Error, Recording  # noqa: E402

DEFAULT_TIMEOUT_S = 30.0
DEFAULT_MAX_STDOUT = 100_000      # characters of printed output kept (the newest)
MAX_STDERR = 20_000               # characters of stderr kept (the newest): warnings repeat
__all__ = ["record", "Timeout", "DEFAULT_TIMEOUT_S", "DEFAULT_MAX_OPS", "DEFAULT_MAX_STDOUT"]


class Timeout(BaseException):
    """Raised inside the user's program when its time is up.

    A BaseException so that a user's `except Exception:` cannot swallow it."""


class _BoundedText(io.TextIOBase):
    """A stdout that keeps the newest `limit` characters and counts what it dropped; with
    `shown` (the terminal's stream, see terminal.py), everything also goes there, unbounded."""

    def __init__(self, limit: int, shown=None):
        self.limit, self.parts, self.size, self.dropped = limit, deque(), 0, 0
        self.shown = shown

    def writable(self):
        return True

    def write(self, s):
        s = str(s)
        if self.shown is not None:
            self.shown.write(s)
        self.parts.append(s)
        self.size += len(s)
        while self.size > self.limit and self.parts:
            extra = self.size - self.limit
            head = self.parts[0]
            if len(head) <= extra:
                self.parts.popleft()
                self.size -= len(head)
                self.dropped += len(head)
            else:
                self.parts[0] = head[extra:]
                self.size -= extra
                self.dropped += extra
        return len(s)

    def text(self) -> str:
        body = "".join(self.parts)
        if self.dropped:
            return f"[... {self.dropped} earlier characters dropped ...]\n" + body
        return body


# -- running a program ---------------------------------------------------------------------------

def _user_line(tb, filename) -> Optional[int]:
    line = None
    for frame, lineno in traceback.walk_tb(tb):
        if frame.f_code.co_filename == filename:
            line = lineno
    return line


def _user_stack(session: Session, tb) -> list:
    """The frames of the traceback in the user's files, outermost first."""
    stack = []
    for frame, lineno in traceback.walk_tb(tb):
        name = session.files.name(frame.f_code.co_filename)
        if name is not None:
            stack.append({"file": name, "line": lineno, "function": frame.f_code.co_name})
    return stack


def _frame_line(frame, filename: str) -> Optional[int]:
    """The line of the innermost frame of `filename` on `frame`'s stack."""
    while frame is not None:
        if frame.f_code.co_filename == filename:
            return frame.f_lineno
        frame = frame.f_back
    return None


# tapeviz's own code, whose bookkeeping a Timeout must not cut in half (recorder.py is in it)
_TAPEVIZ_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep
_DEFER_S = 0.02      # how soon the limit tries again when it fell inside tapeviz's code
_DEFERS = 50         # at most a second of trying: a user module run by tapeviz's import hook
                     # has tapeviz's frames under it for as long as it runs


def _in_tapeviz(frame, filename: str) -> bool:
    """Whether tapeviz's code runs above the program's innermost frame: the op callback, a
    gradient call's summary. A Timeout raised there would leave a step half kept (counted
    but never streamed) when the program catches it and goes on, so it waits a moment."""
    while frame is not None:
        code = frame.f_code.co_filename
        if code == filename:
            return False
        if code.startswith(_TAPEVIZ_DIR):
            return True
        frame = frame.f_back
    return False


def _error(session: Session, exc: BaseException, filename: str, timeout: float,
           timer: Optional[_Timer] = None) -> Error:
    lines = session.source.splitlines()
    if isinstance(exc, Timeout):
        line = _user_line(exc.__traceback__, filename) or (timer.line if timer else None)
        err = Error("Timeout", f"the program ran longer than its time limit of {timeout:g} s "
                    "and was stopped", line)
    elif isinstance(exc, SyntaxError) and exc.filename == filename:
        err = Error(type(exc).__name__, f"{exc.msg}", exc.lineno)
    else:
        # Where it was raised: the deepest frame in the user's files (a helper module's line,
        # not the program's line that called it), with the user-side stack that led there
        stack = _user_stack(session, exc.__traceback__)
        message = _plain_message(str(exc)) or type(exc).__name__
        err = Error(type(exc).__name__, message + hints.did_you_mean(exc),
                    stack[-1]["line"] if stack else None,
                    file=stack[-1]["file"] if stack else None, stack=stack or None)
        if stack and stack[-1]["file"] != session.files.main:
            sources = session.files.sources(session.source)
            lines = sources.get(err.file, "").splitlines()
    text = lines[err.line - 1] if err.line and 0 < err.line <= len(lines) else ""
    err.hint = hints.error_hint(err.type, err.message, text, source=session.source)
    return err


_TF_NOISE = re.compile(r"\{\{function_node [^}]*\}\}\s*")
_TF_OP_TAIL = re.compile(r"\s*\[Op:(\w+)\](?:\s*name:\s*\S*)?\s*$")


def _plain_message(message: str) -> str:
    """An eager op's error without TF's internal routing: "... [Op:MatMul] name: " becomes
    "... (in the MatMul op)" and the "{{function_node ...}}" prefix goes."""
    message = _TF_NOISE.sub("", message.strip())
    return _TF_OP_TAIL.sub(lambda m: f" (in the {m.group(1)} op)", message).strip()


class _Timer:
    fired = False
    line: Optional[int] = None    # the program's line the first alarm interrupted
    deadline: Optional[float] = None   # time.monotonic() when the limit is up (None: none)
    seconds: float = 0.0          # the limit, from the program's start
    deferred: int = 0             # alarms that fell inside tapeviz's code and waited
    live_seconds: Optional[float] = None   # the limit once the program charts its steps

    def lift(self) -> None:
        """The program's first steps were streamed (step_stream.py): the page charts them live
        and has Stop, so, where the job allows (local mode's page), its limit becomes
        `live_seconds` from its start. The runner lifts its own deadline on the same message."""
        live = self.live_seconds
        if not live or self.deadline is None or self.fired or live <= self.seconds:
            return
        self.deadline += live - self.seconds
        self.seconds = live
        signal.setitimer(signal.ITIMER_REAL, max(0.001, self.deadline - time.monotonic()))

    def overrun(self, thread: threading.Thread, filename: str) -> None:
        """A thread of the program still runs at the limit, after its main code ended."""
        self.fired = True
        self.line = _frame_line(sys._current_frames().get(thread.ident), filename)
        raise Timeout()


# The server's "interrupt" (the page's Stop, `record --live`'s Stop): the program gets
# KeyboardInterrupt, as under Ctrl+C, at the next alarm outside tapeviz's own code
STOP_MESSAGE = "stopped from tapeviz, as Ctrl+C would stop it"
_interrupt = threading.Event()


def interrupt() -> None:
    """Stop the running program as Ctrl+C would: it may catch KeyboardInterrupt and end its
    own way; the recording keeps every step. Called from the worker's command thread."""
    _interrupt.set()
    handler = signal.getsignal(signal.SIGALRM)
    if getattr(handler, "__name__", "") == "on_alarm":     # the time limit's: it defers
        signal.pthread_kill(threading.main_thread().ident, signal.SIGALRM)
    else:
        import _thread
        _thread.interrupt_main()


def _as_timeout(exc: BaseException, timer: Optional[_Timer]) -> BaseException:
    """A Timeout raised inside `tf.py_function` comes out of TensorFlow as an OpError
    (UnknownError, its message a traceback naming the server's paths): it is a Timeout."""
    if timer is not None and timer.fired and isinstance(exc, tf.errors.OpError):
        return Timeout().with_traceback(exc.__traceback__)
    return exc


@contextlib.contextmanager
def _time_limit(seconds: Optional[float], filename: str = "program.py"):
    """Raise Timeout in the user's program after `seconds` (main thread only)."""
    timer = _Timer()
    if not seconds or threading.current_thread() is not threading.main_thread():
        yield timer
        return

    def on_alarm(signum, frame):
        line = _frame_line(frame, filename)
        if line is None:
            # The program is not on the stack: it has returned, and tapeviz is closing the
            # run (the limit is disarmed next). A program that ended in time did not time out.
            return
        if timer.deferred < _DEFERS and _in_tapeviz(frame, filename):
            timer.deferred += 1
            signal.setitimer(signal.ITIMER_REAL, _DEFER_S)
            return
        if _interrupt.is_set() and not timer.fired:
            _interrupt.clear()
            timer.deferred = 0
            signal.setitimer(signal.ITIMER_REAL, max(0.001, timer.deadline - time.monotonic()))
            raise KeyboardInterrupt(STOP_MESSAGE)
        # Again a second later, in case the program catches BaseException and goes on.
        signal.setitimer(signal.ITIMER_REAL, 1.0)
        if not timer.fired:
            # Kept here: a later alarm may fire while the first Timeout unwinds (a busy
            # machine), and its traceback no longer passes through the program.
            timer.line = line
        timer.fired = True
        raise Timeout()

    previous = signal.signal(signal.SIGALRM, on_alarm)
    timer.deadline, timer.seconds = time.monotonic() + seconds, seconds
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield timer
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


@contextlib.contextmanager
def _stdin_at_end():
    """While the program runs, its stdin is at its end, as for `python PROGRAM.py <
    /dev/null`: `input()` raises EOFError at once, and so does a child process's read of fd
    0. A worker's fd 0 is its job channel, which stays open: `input()` waited there until
    the time limit, which then blamed a loop."""
    saved = sys.stdin
    try:
        saved_fd = os.dup(0)
    except OSError:                   # no fd 0 at all: reads fail already, as plainly
        yield
        return
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    sys.stdin = open(0, "r", encoding="utf-8", closefd=False)
    try:
        yield
    finally:
        sys.stdin = saved
        os.dup2(saved_fd, 0)
        os.close(saved_fd)


def record(source: str, filename: str = "program.py", timeout: Optional[float] = DEFAULT_TIMEOUT_S,
           max_ops: int = DEFAULT_MAX_OPS, max_stdout: int = DEFAULT_MAX_STDOUT,
           namespace: Optional[dict] = None, program: Optional[dict] = None,
           tapes: Optional[tuple] = None, emit=None, on_stopped=None,
           eager: bool = False, keep_steps: Optional[int] = None,
           keep: Optional[Keep] = None, live_timeout: Optional[float] = None) -> Recording:
    """Run `source` as a program under the recorder and return what it recorded.

    Never raises for a fault of the program: syntax errors, exceptions and timeouts are
    reported in `Recording.error`, with everything recorded up to that point. `namespace`,
    if given, receives the program's globals (tests compare them with a plain run).
    `program` ({argv, cwd, path}) runs it as `python PROGRAM.py ARGS...` would (program.py);
    `tapes` (A, B) records only those top-level tapes; `keep_steps` N only the first N
    tapes each top-level `with` line opens, the rest of a loop running uninstrumented but
    summarized (window.py); `keep`, a keep policy (keep.py: the first, newest and
    anomalous steps kept whole), in its stead. `emit`, if given (the
    worker's channel), receives printed output as it is written and, should the program
    call os._exit, the recording so far (see exits.py). `on_stopped()` is called when the
    program has stopped and the recording is being built (the runner then knows the time
    limit was kept and waits for a large recording). `eager` runs it with tf.functions run
    eagerly (see _functions_eagerly). `live_timeout`: the time limit, from the start, of a
    program once its first step summaries were streamed (a run the page charts live)."""
    started = time.perf_counter()
    session = Session(source, filename, max_ops)
    shown = terminal.opened(program)
    out = _BoundedText(max_stdout, shown.stdout)
    err = _BoundedText(min(max_stdout, MAX_STDERR), shown.stderr)
    try:
        code = compile(source, filename, "exec", dont_inherit=True)
    except (SyntaxError, ValueError) as exc:   # ValueError: e.g. source with NUL bytes
        return _not_compiled(session, shown, exc, timeout, started)
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    tape_class, env, namespace = _program_globals(session, program, namespace)
    window = TapeWindow(session, tapes, keep_steps, keep)
    window.open()
    try:
        error = _run(session, code, namespace, env=env, tape_class=tape_class, out=out,
                     err=err, emit=emit, started=started, timeout=timeout, eager=eager,
                     live_timeout=live_timeout)
    finally:
        shown.close()
        window.close()
        linecache.cache.pop(filename, None)
        if on_stopped is not None:
            on_stopped()
    rec = _recording(session, code, namespace, out, error, started)
    rec.stderr = err.text()
    rec.argv = list(program["argv"]) if program and program.get("argv") else None
    rec.eager = eager
    if error is not None and error.type == "KeyboardInterrupt" and error.message == STOP_MESSAGE:
        rec.cut_short = {"why": "stopped", "steps": len(rec.steps),
                         "note": "stopped when asked: the program got KeyboardInterrupt, as "
                                 "under Ctrl+C, and every step up to then is kept"}
    if error is not None and error.type == "Timeout":
        rec.cut_short = {"why": "timeout", "steps": len(rec.steps),
                         "note": "the program was stopped at its time limit; what it recorded "
                                 "until then is kept"}
    return rec


def _not_compiled(session: Session, shown, exc: Exception, timeout: Optional[float],
                  started: float) -> Recording:
    """The recording of a program that does not compile: nothing ran, its error alone."""
    if isinstance(exc, SyntaxError):  # includes IndentationError
        if shown.stderr is not None:  # as Python prints it, before running anything
            shown.stderr.write("".join(traceback.format_exception_only(type(exc), exc)))
        shown.close()
        return session.finish("", _error(session, exc, session.filename, timeout or 0),
                              time.perf_counter() - started)
    shown.close()
    return session.finish("", Error("SyntaxError", str(exc), None,
                                    "The program text is not valid Python source."),
                          time.perf_counter() - started)


def _program_globals(session: Session, program: Optional[dict], namespace: Optional[dict]):
    """(the run's tape class, its ProgramEnv, the program's globals): builtins whose
    `__import__` gives the program the instrumented `tensorflow`."""
    user_builtins = dict(builtins.__dict__)
    tape_class = make_tape_class(session)
    user_builtins["__import__"] = make_import(tape_class, session.torch_imported)
    env = ProgramEnv(program, session.files, user_builtins, session.filename)
    namespace = env.namespace(namespace)
    namespace.update({"__name__": "__main__", "__file__": session.filename,
                      "__builtins__": user_builtins})
    session.module_globals = namespace
    return tape_class, env, namespace


class _LiveLimit:
    """Called by the step stream when it first sends steps: lifts the time limit (once the
    timer exists) to `seconds`, for a run the page charts live (_Timer.lift)."""

    def __init__(self, seconds: Optional[float]):
        self.seconds, self.timer, self.asked = seconds, None, False

    @contextlib.contextmanager
    def armed(self, timer: "_Timer"):
        timer.live_seconds = self.seconds
        self.timer = timer
        if self.asked:
            timer.lift()
        yield

    def __call__(self) -> None:
        self.asked = True
        if self.timer is not None:
            self.timer.lift()


def _run(session: Session, code, namespace: dict, *, env, tape_class, out, err, emit,
         started: float, timeout: Optional[float], eager: bool,
         live_timeout: Optional[float] = None) -> Optional[Error]:
    """Run the compiled program with its output, time limit, tapes and exit steps in place;
    the error it ended with (None: it finished, or exited with status 0)."""
    filename = session.filename
    timer = None
    live = _LiveLimit(live_timeout)
    try:
        with exits.streamed(out, emit) as streamed, streamed_steps(session, emit, live), \
                native_output.captured(streamed) as stdout, \
                native_output.captured(err, 2) as stderr, contextlib.redirect_stdout(stdout), \
                contextlib.redirect_stderr(stderr), \
                exits.answer_os_exit(emit and exits.send_recording_on_exit(
                    session, stdout, started, emit, stderr)), \
                _time_limit(timeout, filename) as timer, live.armed(timer), \
                _watched(session, timer, timeout, emit, out, err, started), env, \
                tf.variable_creator_scope(session.on_variable), adopt_tapes(session, tape_class), \
                mnist_served(session), _stdin_at_end(), _functions_eagerly(session, eager), \
                active.recording(session), autograd.armed(session), \
                shutdown.exit_handlers() as handlers:
            _execute(code, namespace, filename, timer, stderr, handlers)
    except BaseException as exc:      # raise BaseException too: the program ends, the worker not
        exc = _as_timeout(exc, timer)
        if isinstance(exc, SystemExit) and exc.code in (None, 0):
            return None
        return _error(session, exc, filename, (timer.seconds if timer else 0) or timeout or 0,
                      timer)
    return None


@contextlib.contextmanager
def _watched(session: Session, timer: _Timer, timeout: Optional[float], emit, out, err,
             started: float):
    """While the program runs, a watchdog sends the recording so far should the program not
    stop at its time limit (watchdog.py)."""
    dog = watchdog.watching(session, timer, timeout, emit, lambda: (out.text(), err.text()),
                            started, session.max_ops)
    try:
        yield
    finally:
        if dog is not None:
            dog.done()


def _execute(code, namespace: dict, filename: str, timer: _Timer, stderr, handlers) -> None:
    """`exec` the program, then Python's exit steps, as `python PROGRAM.py` ends."""
    threads = set(threading.enumerate())
    try:
        exec(code, namespace)
    except BaseException as exc:
        # As Python prints an uncaught exception, before the exit steps below; a
        # timeout is tapeviz's own stop (plainly, a kill): no traceback
        if not timer.fired:
            terminal.print_uncaught(exc, filename, stderr)
        raise
    finally:
        # As `python PROGRAM.py` exits, also after an exception or sys.exit; not
        # after a timeout, which plainly would have been a kill.
        if not timer.fired:
            shutdown.join_threads(threads, timer.deadline,
                                  lambda thread: timer.overrun(thread, filename))
            handlers.run()


def _recording(session: Session, code, namespace: dict, out: _BoundedText,
               error: Optional[Error], started: float) -> Recording:
    """The stopped program's Recording, with the names its last lines bound."""
    session.quiet += 1
    try:
        session.note_loops(code)               # loops of a program whose ops ran elsewhere
        session.scan_namespace(namespace)      # names bound by the program's last lines
    finally:
        session.quiet -= 1
    with heap.paused():                        # the program has ended: no full collections
        return session.finish(out.text(), error, time.perf_counter() - started)


EAGER_NOTE = ("recorded with --eager: tf.functions (model.fit()'s train_step, @tf.function "
              "steps) ran eagerly, as tf.config.run_functions_eagerly(True) runs them, so "
              "their ops and gradients are recorded one by one; the program ran slower than "
              "plainly, its results are the same")


@contextlib.contextmanager
def _functions_eagerly(session: Session, eager: bool):
    """With `eager`, tf.function runs its Python function eagerly while the program runs
    (undone after): the only way to see each op inside a compiled train step with its
    values. A program that calls run_functions_eagerly itself still decides for its own."""
    if not eager:
        yield
        return
    before = tf.config.functions_run_eagerly()
    tf.config.run_functions_eagerly(True)
    session.warnings.append({"line": None, "kind": "eager", "message": EAGER_NOTE})
    try:
        yield         # tf.data's warning that this does not apply to it, as plainly
    finally:
        tf.config.run_functions_eagerly(before)
