"""Which Python files are the user's project, and what each is called in a recording.

A frame belongs to the user when its file is outside the Python installation, site-packages
and tapeviz itself; ops are attributed to the nearest such frame. Answers are cached per
file name, so the op callback pays one dict lookup per frame it walks.
"""
from __future__ import annotations

import inspect
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


# A generator's or coroutine's frame gets a new f_back each time it is resumed, so what
# lies above it may differ between two walks: such frames are never remembered.
_RESUMABLE = inspect.CO_GENERATOR | inspect.CO_COROUTINE | inspect.CO_ASYNC_GENERATOR


class UserFrameFinder:
    """nearest_user_frame for the op callback, which asks once per op from ~20 library frames
    deep under Keras. Consecutive ops mostly come from the same library call (an optimizer's
    update step runs a dozen ops), so the frames of the last walk are remembered with the
    answer: a frame that is still on the stack has the same callers as before, and the next
    walk stops at the first frame it shares with the last one (often 4 frames up instead of
    20). Only the last walk's frames are held, so a returned frame is let go at the next op."""

    def __init__(self, files: UserFiles):
        self.files = files
        self._last: dict = {}    # frame -> (user frame, its name), frames of the last walk

    def find(self, frame):
        names = self.files.names
        last = self._last
        walked = []
        result = (None, None)
        while frame is not None:
            hit = last.get(frame)
            if hit is not None:
                result = hit
                walked.append(frame)
                break
            code = frame.f_code
            name = names.get(code.co_filename, _UNSEEN)
            if name is _UNSEEN:
                name = self.files.name(code.co_filename)
            if name is not None:
                result = (frame, name)
                break
            if code.co_flags & _RESUMABLE:
                # Above a generator the callers may change: remember only what lies below
                # it (frames that end before it can be resumed elsewhere).
                result = nearest_user_frame(frame, self.files)
                break
            walked.append(frame)
            frame = frame.f_back
        self._last = dict.fromkeys(walked, result)
        return result

    def forget(self) -> None:
        """Let go of the remembered frames (the program's end: they hold its locals)."""
        self._last = {}


__all__ = ["UserFiles", "UserFrameFinder", "library_dirs", "nearest_user_frame"]
