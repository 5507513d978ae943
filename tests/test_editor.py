"""The editor's plain parts: an example's code without its docstring, the Ace markers, and
the run job's phases and timing (no browser; tests/test_editor_browser.py has that)."""
import ast
import threading

import pytest

from tapeviz import examples
from tapeviz.ui import editor
from tapeviz.server import outcome
from tapeviz.server.jobs import Done, Phase
from tapeviz.state.run_job import RunJob


@pytest.mark.parametrize("name", examples.names())
def test_example_code_is_the_file_after_its_docstring(name):
    source = examples.load(name).source
    doc, code = examples.split_docstring(source)
    tree = ast.parse(source)
    assert doc == ast.get_docstring(tree)                  # the reference: Python's own parse
    assert ast.get_docstring(ast.parse(code)) is None
    # Same statements, same order: only the docstring went.
    assert ast.dump(ast.parse(code)) == ast.dump(ast.Module(body=tree.body[1:], type_ignores=[]))
    assert code == examples.code(name) and not code.startswith("\n")


def test_a_program_without_docstring_is_kept_whole():
    assert examples.split_docstring("x = 1\n") == ("", "x = 1\n")
    assert examples.split_docstring("if x\n") == ("", "if x\n")        # not Python: untouched


def test_markers_are_ace_rows_and_an_error_annotation():
    props = editor.markers(3, 5, "boom")
    assert [(m["startRow"], m["className"]) for m in props["markers"]] == [
        (2, editor.ERROR_CLASS), (4, editor.PICK_CLASS)]
    assert props["annotations"] == [{"row": 2, "column": 0, "type": "error", "text": "boom"}]
    assert editor.markers(None, None) == {"markers": [], "annotations": []}


class Clock:
    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now


def test_run_job_says_what_it_waits_for_and_times_each_phase():
    clock, go = Clock(), threading.Event()

    def events(source):          # a job's typed events, as Job.stream() gives them
        yield Phase("queued", 2)
        clock.now = 1.0
        yield Phase("starting")
        clock.now = 4.0
        yield Phase("running")
        go.wait(5)
        clock.now = 4.5
        yield outcome.own(outcome.error_recording(source, "ValueError", "boom"))
        yield Done()

    job = RunJob("x = 1", events, clock=clock)
    for _ in range(500):              # the thread reaches "running" and waits on `go`
        if job.phase == "running":
            break
        threading.Event().wait(0.01)
    assert job.label().startswith("Running your program") and "4.0 s since Run" in job.label()
    go.set()
    job.done.wait(5)
    assert job.recorded.recording.source == "x = 1" and job.phase == "drawing"
    assert job.recorded.data["error"]["type"] == job.recorded.recording.error.type == "ValueError"
    clock.now = 5.0
    assert job.summary() == ("Run → drawn in 5.0 s (waiting in line 1.0 s, a worker starting "
                             "3.0 s, the program 0.5 s, drawing 0.5 s)")


def test_run_job_says_its_place_in_line():
    go = threading.Event()

    def events(source):
        yield Phase("queued", 3)
        go.wait(5)
        yield Done()

    job = RunJob("x = 1", events)
    for _ in range(500):
        if job.place == 3:
            break
        threading.Event().wait(0.01)
    assert job.label().startswith("Waiting for a free worker: your run is number 3 in line")
    go.set()
    assert job.done.wait(5)


def test_a_runner_that_fails_or_ends_without_a_recording_is_a_runner_error():
    def broken(source):
        raise RuntimeError("no workers here")
        yield

    def silent(source):
        yield Done()

    for events, words in ((broken, "RuntimeError: no workers here"), (silent, "without a recording")):
        job = RunJob("x = 1", events)
        assert job.done.wait(5)
        error = job.recorded.recording.error
        assert error.type == "RunnerError" and words in error.message and error.hint
        assert job.recorded.recording.source == "x = 1"
