"""Which files are the user's (worker/frames.py): the program's folder and anything outside
Python's installation, site-packages and tapeviz; named relative to the program's folder."""
import json
import os
import sys
import sysconfig

from tapeviz.worker.frames import UserFiles, nearest_user_frame


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
