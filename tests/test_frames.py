"""Which files are the user's (worker/frames.py): the program's folder and anything outside
Python's installation, site-packages and tapeviz; named relative to the program's folder."""
import json
import os
import sys
import sysconfig

from tapeviz.worker.frames import UserFiles, UserFrameFinder, nearest_user_frame


def test_user_files_are_named_relative_to_the_programs_folder(tmp_path):
    program = str(tmp_path / "main.py")
    files = UserFiles(program)
    assert files.name(program) == "main.py"
    assert files.name(str(tmp_path / "pkg" / "model.py")) == "pkg/model.py"
    assert files.name(str(tmp_path.parent / "elsewhere.py")) == "../elsewhere.py"


def test_libraries_are_not_the_users(tmp_path):
    files = UserFiles(str(tmp_path / "main.py"))
    assert files.name(json.__file__) is None                      # the standard library
    assert files.name(os.path.join(sysconfig.get_paths()["purelib"], "x", "y.py")) is None
    assert files.name("/opt/venv/lib/python3.11/site-packages/tensorflow/ops.py") is None
    assert files.name(sys.modules["tapeviz.worker.frames"].__file__) is None
    assert files.name("<frozen importlib._bootstrap>") is None
    assert files.name("/tmp/__autograph_generated_filea1b2.py") is None


def test_the_nearest_user_frame_skips_library_frames(tmp_path):
    # A call that passes through the standard library (json's encoder calls `default`).
    files = UserFiles(__file__)
    seen = []

    def default(obj):
        seen.append(nearest_user_frame(sys._getframe(0), files))
        return None

    json.dumps(object(), default=default)
    frame, name = seen[0]
    assert name == os.path.basename(__file__) and frame.f_code.co_name == "default"
    # From inside json itself the walk reaches this test's frame.
    frames = UserFiles(str(tmp_path / "main.py"))
    assert nearest_user_frame(sys._getframe(0), frames)[1].endswith("test_frames.py")


# A library module for the finder's tests: its file lies in the standard library's folder,
# so every frame of it is a library frame, as TensorFlow's and Keras's are.
_LIBRARY_SOURCE = '''
import sys

def probe(find, nearest, files):
    here = sys._getframe(0)
    return find(here), nearest(here, files)

def call_three_times(find, nearest, files, user_function):
    first = probe(find, nearest, files)
    second = user_function(find, nearest, files)
    third = probe(find, nearest, files)
    return first, second, third

def probes(find, nearest, files):
    while True:
        yield probe(find, nearest, files)
'''


def _library(tmp_path):
    filename = os.path.join(sysconfig.get_paths()["stdlib"], "tapeviz_test_library.py")
    namespace = {}
    exec(compile(_LIBRARY_SOURCE, filename, "exec"), namespace)
    return namespace


def test_the_frame_finder_answers_as_the_walk_does_when_a_user_frame_comes_between(tmp_path):
    lib = _library(tmp_path)
    files = UserFiles(__file__)
    finder = UserFrameFinder(files)

    def helper(find, nearest, f):          # a user function called from inside the library
        return lib["probe"](find, nearest, f)

    for _ in range(3):                     # later rounds start with the last walk remembered
        results = lib["call_three_times"](finder.find, nearest_user_frame, files, helper)
        for found, walked in results:
            assert found[0] is walked[0] and found[1] == walked[1]
        (first, _), (second, _), (third, _) = results
        assert first[0].f_code.co_name == third[0].f_code.co_name == \
            "test_the_frame_finder_answers_as_the_walk_does_when_a_user_frame_comes_between"
        assert second[0].f_code.co_name == "helper"
    finder.forget()


def test_the_frame_finder_does_not_trust_a_generator_resumed_from_elsewhere(tmp_path):
    # A generator's frame gets the resumer as its caller: a remembered answer would name the
    # first resumer, which has returned, for the second.
    lib = _library(tmp_path)
    files = UserFiles(__file__)
    finder = UserFrameFinder(files)
    gen = lib["probes"](finder.find, nearest_user_frame, files)

    def first_resumer():
        return next(gen)

    def second_resumer():
        return next(gen)

    for resumer in (first_resumer, second_resumer, first_resumer):
        found, walked = resumer()
        assert found[0] is walked[0] and found[0].f_code.co_name == resumer.__name__
