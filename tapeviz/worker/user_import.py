"""Worker side: the `tensorflow` that user code imports, with the run's instrumented tape.

Given through the program's own `__import__`: sys.modules and every library keep the real
module.
"""
from __future__ import annotations

import builtins
import types

import tensorflow as tf


class _Overlay(types.ModuleType):
    """A module that answers a few names itself and forwards the rest to the real module."""

    def __init__(self, real, overrides: dict):
        super().__init__(real.__name__, getattr(real, "__doc__", None))
        self.__dict__["_real"] = real
        self.__dict__.update(overrides)

    def __getattr__(self, name):
        return getattr(self.__dict__["_real"], name)

    def __dir__(self):
        return sorted(set(dir(self.__dict__["_real"])) | set(self.__dict__))


def make_import(tape_class, on_torch=None):
    """An __import__ for the user's globals: `tensorflow` comes with the instrumented tape;
    `on_torch()`, if given, is called when the program imports torch (autograd/).

    Only the user's program sees it; sys.modules and every library keep the real module."""
    overlays: dict = {}
    overlay = _overlay_of(tf, tape_class, overlays)
    real_import = builtins.__import__

    def tapeviz_import(name, globals=None, locals=None, fromlist=(), level=0):
        module = real_import(name, globals, locals, fromlist, level)
        if level == 0 and (name == "tensorflow" or name.startswith("tensorflow.")):
            if name == "tensorflow" or not fromlist:
                return overlay           # `import tensorflow.x as y` walks attributes from here
            # `from tensorflow.compat import v1`, `from tensorflow.compat.v1 import ...`
            return overlays.get(id(module), module)
        if on_torch is not None and level == 0 and (name == "torch" or name.startswith("torch.")):
            on_torch()
        return module

    return tapeviz_import


# Submodules through which a program reaches the tape class: tf.autodiff, tf.compat.v1/v2
_TAPE_PATHS = ("autodiff", "compat", "v1", "v2")


def _overlay_of(module, tape_class, made: dict, depth: int = 0):
    """`module`, or an overlay of it whose GradientTape (and whose submodules' ones, along
    _TAPE_PATHS) is the instrumented class. `made` maps id(real module) -> what it became."""
    key = id(module)
    if key in made:
        return made[key]
    made[key] = module                       # a cycle (compat.v2.compat) ends here
    overrides = {}
    if getattr(module, "GradientTape", None) is tf.GradientTape:
        overrides["GradientTape"] = tape_class
    if depth < 3:
        for name in _TAPE_PATHS:
            try:
                sub = getattr(module, name, None)
            except Exception:                 # a lazy module that fails to load
                continue
            if isinstance(sub, types.ModuleType):
                wrapped = _overlay_of(sub, tape_class, made, depth + 1)
                if wrapped is not sub:
                    overrides[name] = wrapped
    if overrides:
        made[key] = _Overlay(module, overrides)
    return made[key]
