"""Which Python files are the user's project, and what each is called in a recording.

A frame belongs to the user when its file is outside the Python installation, site-packages
and tapeviz itself; ops are attributed to the nearest such frame. Answers are cached per
file name, so the op callback pays one dict lookup per frame it walks.
"""
from __future__ import annotations

import linecache
import os
import site
import sysconfig
from typing import Optional

_UNSEEN = object()
_TAPEVIZ_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def library_dirs() -> tuple:
    """Folders whose files are never the user's: the standard library, site-packages, tapeviz."""
    dirs = {_TAPEVIZ_DIR}
    paths = sysconfig.get_paths()
    for key in ("stdlib", "platstdlib", "purelib", "platlib"):
        if paths.get(key):
            dirs.add(paths[key])
    try:
        dirs.update(site.getsitepackages())
    except AttributeError:        # an old virtualenv's site module
        pass
    user_site = getattr(site, "USER_SITE", None)
    if user_site:
        dirs.add(user_site)
    return tuple(os.path.join(os.path.realpath(d), "") for d in dirs if d)


class UserFiles:
    """The user's files of one run: classify a code object's file name, name it relative to
    the program's folder, and hand back the text of every user file seen."""

    def __init__(self, program: str, root: Optional[str] = None):
        self.program = program
        absolute = os.path.isabs(program)
        self.root = root or (os.path.dirname(program) if absolute else None)
        self.main = os.path.basename(program) if absolute else program
        self.library = library_dirs()
        # file name as code objects carry it -> its name in the recording, or None (a library)
        self.names: dict = {program: self.main}

    def name(self, filename: str) -> Optional[str]:
        """The recording's name for `filename` when it is the user's, else None (cached)."""
        names = self.names
        if filename in names:
            return names[filename]
        names[filename] = name = self._classify(filename)
        return name

    def _classify(self, filename: str) -> Optional[str]:
        if not filename or filename.startswith("<"):      # <frozen ...>, <string>, <stdin>
            return None
        base = os.path.basename(filename)
        if base.startswith("__autograph_generated_file") or "/site-packages/" in filename \
                or "/dist-packages/" in filename:
            return None
        path = os.path.realpath(filename)
        if path.startswith(self.library):
            return None
        if self.root is None:
            return filename
        rel = os.path.relpath(path, os.path.realpath(self.root))
        return rel.replace(os.sep, "/")

    def sources(self, main_source: str) -> dict:
        """{recording name: text} of every user file seen; the program's own text as given."""
        out = {}
        for filename, name in self.names.items():
            if name is None or name in out:
                continue
            if filename == self.program:
                out[name] = main_source
                continue
            lines = linecache.getlines(filename)
            if not lines:
                try:
                    with open(filename, encoding="utf-8", errors="replace") as f:
                        lines = f.readlines()
                except OSError:
                    continue
            out[name] = "".join(lines)
        return out


def nearest_user_frame(frame, files: UserFiles):
    """The first frame from `frame` outward whose file is the user's, or None."""
    names = files.names
    while frame is not None:
        filename = frame.f_code.co_filename
        name = names.get(filename, _UNSEEN)
        if name is _UNSEEN:
            name = files.name(filename)
        if name is not None:
            return frame, name
        frame = frame.f_back
    return None, None


# The files and functions where a library's default training step enters its GradientTape
# around the user's model and loss: Keras 3's TensorFlow trainer, and Keras 2 (tf_keras, or
# keras before 3) whose train_step hands its tape to optimizer.minimize.
_TRAIN_STEPS = (("keras/src/backend/tensorflow/trainer.py", "train_step"),
                ("tf_keras/src/engine/training.py", "train_step"),
                ("keras/engine/training.py", "train_step"))


def library_train_step(code) -> bool:
    """Is `code` a library's default train_step (model.fit() with no train_step of the
    user's)? Matched by file and function, so no library is imported to ask."""
    filename = code.co_filename.replace("\\", "/")
    return any(code.co_name == name and filename.endswith(path) for path, name in _TRAIN_STEPS)


__all__ = ["UserFiles", "library_dirs", "library_train_step", "nearest_user_frame"]
