"""`tapeviz record --live`: the run followed in the app while it happens.

The command line runs the program as `record` does, and rewrites the recording file with
the steps streamed so far (`running: true`) every half second; the app it starts follows that
file (state/follow.py) and charts them live. The page's Stop leaves a file beside the
recording (recording.stop_path), and the program is stopped as the page's own Stop does, as
Ctrl+C would (Job.interrupt): it ends its own way, and the recording keeps every step. The last write is the recording `record` writes. No TensorFlow.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Optional

from .recording import Recording, stop_path, write_whole
from .server import jobs
from .state.live_steps import LiveSteps

WRITE_EVERY_S = 0.5
OUTPUT_KEPT = 20_000          # characters of printed output a snapshot carries (its tail)


class LiveFile:
    """The recording file while the run goes on: source, steps so far, output's tail. The
    steps are held as the page holds a live run (LiveSteps: the first and newest whole, the
    ones between thinned), so a rewrite a second stays small however long the run; the
    page takes each rewrite's new steps, and the last write is the whole recording."""

    def __init__(self, path: Path, source: str, program: str):
        self.path, self.started = path, time.perf_counter()
        self.source, self.program = source, program
        self.steps = LiveSteps()
        self.output = ""
        self.written = 0.0

    def take(self, event) -> None:
        if isinstance(event, jobs.Steps):
            self.steps.take(event.steps, event.step_sources)
        elif isinstance(event, jobs.Output):
            self.output = (self.output + event.text)[-OUTPUT_KEPT:]

    def write(self, force: bool = False) -> None:
        if not force and time.perf_counter() - self.written < WRITE_EVERY_S:
            return
        run = self.steps.snapshot()
        rec = Recording(self.source, program=self.program, running=True, stdout=self.output,
                        duration_s=time.perf_counter() - self.started, steps=run.steps,
                        step_sources=run.step_sources, dropped=run.dropped)
        write_whole(self.path, json.dumps(rec.to_dict(), allow_nan=False))
        self.written = time.perf_counter()


def follow(pool, spec: jobs.Record, live: LiveFile) -> dict:
    """Run `spec`, rewriting the live file as its steps stream; interrupt it when the page
    asks. Returns the recording as `record` would (a stopped run's cut_short says so)."""
    live.write(force=True)
    stop = stop_path(live.path)
    job = pool.submit(spec)
    result: Optional[dict] = None
    asked = False
    while True:
        event = job.next_event(timeout=0.25)
        if isinstance(event, jobs.Recorded):
            result = event.data
        elif isinstance(event, jobs.Done):
            break
        elif event is not None:
            live.take(event)
        if not asked and os.path.exists(stop):
            asked = True
            print("tapeviz record: stopped from the page, as Ctrl+C would stop it; every "
                  "step so far is kept", file=sys.stderr)
            job.interrupt()
        live.write()
    try:
        os.remove(stop)
    except OSError:
        pass
    return result if result is not None else job.result


def app_env(recording: Path, follow: bool) -> dict:
    """The environment of an app opened on `recording` (`view`, `record --live`): this
    package on its path, and the file to open, followed as it changes when `follow`."""
    env = dict(os.environ, TAPEVIZ_VIEW=str(recording.resolve()))
    if follow:
        env["TAPEVIZ_FOLLOW"] = "1"
    root = str(Path(__file__).resolve().parent.parent)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [root, os.environ.get("PYTHONPATH")]))
    return env


def start_app(recording: Path, port: int, app: Path) -> subprocess.Popen:
    """The app on `port`, following `recording` (the page rereads it as it changes)."""
    env = app_env(recording, follow=True)
    command = [sys.executable, "-m", "streamlit", "run", str(app), "--server.port", str(port),
               "--server.headless", "true"]
    # SIGTERM ends this command as Ctrl+C does, so its app (a session of its own) ends too
    signal.signal(signal.SIGTERM, _interrupted)
    return subprocess.Popen(command, env=env, cwd=app.parent, stdin=subprocess.DEVNULL,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)


def stay_open(app: subprocess.Popen, port: int) -> None:
    """The finished run stays in the app until Ctrl+C (or SIGTERM), then the app ends."""
    print(f"tapeviz record: the app shows the finished run at http://localhost:{port}; "
          "press Ctrl+C to end it", file=sys.stderr)
    try:
        app.wait()
    except KeyboardInterrupt:
        pass
    finally:
        stop_app(app)


def _interrupted(signum, frame):
    raise KeyboardInterrupt


def stop_app(app: subprocess.Popen) -> None:
    if app.poll() is None:
        os.killpg(app.pid, signal.SIGTERM)
        try:
            app.wait(10)
        except subprocess.TimeoutExpired:
            os.killpg(app.pid, signal.SIGKILL)
