"""A recording file followed while its program writes it (`tapeviz view --follow`, `record
--live`): each rewrite's new steps reach the live run view, the last write becomes the
page's recording, and Stop leaves the file its writer looks for. Files written here the way
the writers write them (a Recording rewritten whole), no server."""
import os

from tapeviz.draw import run_figures
from tapeviz.recording import Recording, stop_path, write_whole
from tapeviz.state import debugger
from tapeviz.state.follow import Follow
from builders import STEP_SOURCES as SOURCES, step_summary as summary


def write(path, calls, running, source="for step in range(9): ...\n"):
    rec = Recording(source, program="train.py", running=running, stdout=f"{len(calls)} steps\n")
    rec.steps = [summary(i, 1.0 / (i + 1), [1.0, 0.5]) for i in calls]
    rec.step_sources = SOURCES
    write_whole(path, rec.to_json())
    # a rewrite within the same clock tick must still be seen as new
    os.utime(path, ns=(os.stat(path).st_atime_ns, os.stat(path).st_mtime_ns + len(calls) + 1))


def test_each_rewrite_adds_its_new_steps_once_then_the_end_is_the_recording(tmp_path):
    path = tmp_path / "run.json"
    write(path, range(3), running=True)
    follow = Follow(str(path))
    assert follow.poll() and follow.running and follow.live.seen == 3
    assert not follow.poll()                  # unchanged: nothing read again
    write(path, range(7), running=True)
    assert follow.poll() and follow.live.seen == 7
    assert [s.call for s in follow.live.snapshot().steps] == list(range(7))
    assert follow.snapshot.stdout == "7 steps\n" and "7 steps so far" in follow.label()
    write(path, range(9), running=False)
    assert follow.poll() and not follow.running
    rec, _ = follow.final
    assert len(rec.steps) == 9 and not rec.running


def test_the_page_state_charts_the_run_then_opens_it_when_it_ends(tmp_path):
    path = tmp_path / "run.json"
    write(path, range(4), running=True, source="print('train')\n")
    state = debugger.of({})
    state.start_following(str(path))
    assert state.follow is not None and state.rec is None and state.source == "print('train')\n"
    steps = run_figures.site_steps(state.follow.live.snapshot())
    assert [s["step"] for s in steps] == [1, 2, 3, 4]
    assert not state.follow_poll()
    write(path, range(6), running=False, source="print('train')\n")
    assert state.follow_poll() and state.follow is None
    assert len(state.rec.steps) == 6 and state.opened_name == "run.json"
    assert "Followed" in state.run_status[0]


def test_stop_leaves_the_file_its_writer_looks_for(tmp_path):
    path = tmp_path / "run.json"
    write(path, range(2), running=True)
    follow = Follow(str(path))
    follow.ask_stop()
    assert os.path.exists(stop_path(path)) and follow.stop_sent
    assert "stop asked" in follow.label()


def test_a_missing_or_broken_file_is_said_and_keeps_what_was_charted(tmp_path):
    path = tmp_path / "run.json"
    follow = Follow(str(path))
    assert not follow.poll() and "Cannot read" in follow.problem
    write(path, range(3), running=True)
    assert follow.poll() and follow.problem is None
    path.write_text('{"schema": "tapeviz.recording/1", "steps": 7}')
    assert not follow.poll() and follow.problem and follow.live.seen == 3 and follow.running


def test_an_end_read_by_a_stopped_script_thread_is_adopted_by_the_next(tmp_path):
    """Streamlit stops the old script thread at a read of session state when a click reruns
    the page: the end its follow already read must still become the page's recording."""
    path = tmp_path / "run.json"
    write(path, range(2), running=True)

    class Stopping(dict):
        armed = False

        def pop(self, *args):
            if self.armed:
                self.armed = False
                raise RuntimeError("StopException: the script thread was stopped")
            return super().pop(*args)

    widgets = Stopping()
    state = debugger.of(widgets)
    state.start_following(str(path))
    write(path, range(5), running=False)
    widgets.armed = True
    try:
        state.follow_poll()
    except RuntimeError:
        pass
    assert state.follow is not None and state.follow.final is not None
    assert state.follow_poll() and state.follow is None and len(state.rec.steps) == 5


def test_a_long_runs_snapshot_stays_small_and_the_page_still_gets_every_new_step(tmp_path):
    from tapeviz.live_cli import LiveFile
    from tapeviz.recording import RUNNING_FIRST, RUNNING_NEWEST, running_steps
    from tapeviz.server.jobs import Steps
    assert running_steps(list(range(10_000))) == \
        list(range(RUNNING_FIRST)) + list(range(10_000 - RUNNING_NEWEST, 10_000))
    path = tmp_path / "run.json"
    live = LiveFile(path, "print()\n", "train.py")
    follow = Follow(str(path))
    for start in range(0, 20_000, 2_000):       # a second's worth of steps, then a rewrite
        live.take(Steps([summary(i, 1.0, [1.0, 0.5]) for i in range(start, start + 2_000)],
                        SOURCES if start == 0 else []))
        live.write(force=True)
        os.utime(path, ns=(0, start + 1))
        assert follow.poll()
    assert follow.live.seen == 20_000           # the page took each rewrite's new steps
    # thinned as the page thins a live run (KEEP_ALL, give or take the newest second's steps)
    assert len(follow.snapshot.steps) < 6_000 and follow.snapshot.dropped["steps"] > 10_000
