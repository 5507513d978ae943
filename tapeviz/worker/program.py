"""Run a program as `python PROGRAM.py ARGS...` would: `sys.argv`, its folder first on
`sys.path`, the user's working directory, a real `__main__` module, and the instrumented
`tensorflow` in every module of the user's project that it imports.
"""
from __future__ import annotations

import importlib.machinery
import os
import sys
import types
from typing import Optional

from .frames import UserFiles


class _UserLoader(importlib.machinery.SourceFileLoader):
    """Loads a module of the user's project with the run's builtins, whose `__import__`
    hands it the instrumented `tensorflow` (exec keeps a `__builtins__` already there)."""

    def __init__(self, fullname, path, user_builtins):
        super().__init__(fullname, path)
        self.user_builtins = user_builtins

    def exec_module(self, module):
        module.__dict__["__builtins__"] = self.user_builtins
        super().exec_module(module)


class _UserModules:
    """A meta path finder: the user's own modules get `_UserLoader`; all others, None (the
    usual finders take them, unchanged)."""

    def __init__(self, files: UserFiles, user_builtins: dict):
        self.files, self.user_builtins = files, user_builtins

    def find_spec(self, fullname, path=None, target=None):
        spec = importlib.machinery.PathFinder.find_spec(fullname, path, target)
        if spec is None or not isinstance(spec.loader, importlib.machinery.SourceFileLoader) \
                or not spec.origin or self.files.name(spec.origin) is None:
            return None
        spec.loader = _UserLoader(fullname, spec.origin, self.user_builtins)
        return spec

    def invalidate_caches(self):
        pass


class ProgramEnv:
    """The process state a program sees while it runs, put back afterwards.

    `program` is the job's {"argv": [...], "cwd": dir, "path": dir}; any may be missing (the
    app's programs have none; hosted mode keeps its sandbox's directory). Without an argv
    the program sees `[filename]`, as `python program.py` gives it: the worker's own argv
    (the zygote's path and a descriptor number) made argparse fail on "unrecognized
    arguments"."""

    def __init__(self, program: Optional[dict], files: UserFiles, user_builtins: dict,
                 filename: str = "program.py"):
        self.program = program or {}
        self.filename = filename
        self.finder = _UserModules(files, user_builtins) if program else None
        self.main = types.ModuleType("__main__")
        self._saved = None

    def namespace(self, given: Optional[dict]) -> dict:
        """The program's globals: those of a real `__main__` module when it runs as a program
        (pickle, dataclasses and `sys.modules["__main__"]` then see it as Python shows it)."""
        if given is not None:
            return given
        return self.main.__dict__ if self.program else {}

    def __enter__(self):
        p = self.program
        self._saved = (sys.argv, list(sys.path), os.getcwd(), sys.modules.get("__main__"))
        sys.argv = list(p.get("argv") or [self.filename])
        if not p:
            return self
        if p.get("path"):
            if sys.path:
                sys.path[0] = p["path"]
            else:
                sys.path.insert(0, p["path"])
        if p.get("cwd"):
            os.chdir(p["cwd"])
        sys.modules["__main__"] = self.main
        sys.meta_path.insert(0, self.finder)
        return self

    def __exit__(self, *exc):
        argv, path, cwd, main = self._saved
        sys.argv = argv
        sys.path[:] = path
        if self.finder in sys.meta_path:
            sys.meta_path.remove(self.finder)
        # The user's modules were bound to this run's tape: a later run imports them afresh,
        # as a new `python PROGRAM.py` would.
        for name, module in list(sys.modules.items()):
            if isinstance(getattr(getattr(module, "__spec__", None), "loader", None), _UserLoader):
                del sys.modules[name]
        if main is not None:
            sys.modules["__main__"] = main
        try:
            os.chdir(cwd)
        except OSError:
            pass
        return False
