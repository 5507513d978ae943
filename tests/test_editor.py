"""The editor's plain parts: an example's code without its docstring, the Ace markers, and
the run job's phases and timing (no browser; tests/test_editor_browser.py has that)."""
import ast
import threading

import pytest

from tapeviz import examples
from tapeviz.ui import editor
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

    def run(source, on_wait, on_phase):
        on_wait(2)
        clock.now = 1.0
        on_phase("starting")
        clock.now = 4.0
        on_phase("running")
        go.wait(5)
        clock.now = 4.5
        return {"source": source}

    job = RunJob("x = 1", run, clock=clock)
    for _ in range(500):              # the thread reaches "running" and waits on `go`
        if job.phase == "running":
            break
        threading.Event().wait(0.01)
    assert job.label().startswith("Running your program") and "4.0 s since Run" in job.label()
    go.set()
    job.done.wait(5)
    assert job.result == {"source": "x = 1"} and job.phase == "drawing"
    clock.now = 5.0
    assert job.summary() == ("Run → drawn in 5.0 s (waiting in line 1.0 s, a worker starting "
                             "3.0 s, the program 0.5 s, drawing 0.5 s)")
