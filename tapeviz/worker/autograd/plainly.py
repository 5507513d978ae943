"""A torch call made from inside the capture's handlers, its warnings told where plain
Python tells them.

PyTorch attributes a warning from its C++ code to the innermost Python frame, and a
`torch.nn.functional` warning's stacklevel counts from the function: under the capture both
would name tapeviz's handler. So while the call runs, an "always" filter and a collecting
`showwarning` take the warnings as they come, and after it each is issued again at the
frame that made the torch call, under the program's own filters and once-per-line registry.
Neither `warnings.catch_warnings` nor `simplefilter` is used: each tells Python the filters
changed, which clears every module's registry, and a warning shown once per line plainly
would then be shown on every step.
"""
from __future__ import annotations

import os
import warnings

import torch.overrides

_HERE = os.path.dirname(os.path.abspath(__file__)) + os.sep
# PyTorch's dispatch to a TorchFunctionMode: a Python torch function re-entered from here
_OVERRIDES = os.path.abspath(torch.overrides.__file__)
_ALWAYS = ("always", None, Warning, None, 0)


def caller_of(func, frame):
    """The frame that made the torch call `func` whose handler's caller is `frame`: past
    PyTorch's dispatch, and past the first entry of a Python torch function (`F.softmax`
    enters itself, asks the mode, and the mode runs it again)."""
    code = getattr(func, "__code__", None)
    while frame is not None and (frame.f_code.co_filename == _OVERRIDES or frame.f_code is code):
        frame = frame.f_back
    return frame


def call(func, args, kwargs, caller):
    """func(*args, **kwargs), its warnings issued as plainly at `caller`, the frame that
    made the torch call."""
    caught = []
    shown = warnings.showwarning

    def keep(message, category, filename, lineno, file=None, line=None):
        caught.append((message, category, filename, lineno))

    warnings.showwarning = keep
    warnings.filters.insert(0, _ALWAYS)
    try:
        return func(*args, **kwargs)
    finally:
        if warnings.filters and warnings.filters[0] is _ALWAYS:
            del warnings.filters[0]
        else:                         # the call changed the filters itself
            try:
                warnings.filters.remove(_ALWAYS)
            except ValueError:
                pass
        warnings.showwarning = shown
        _issue(caught, caller)


def _issue(caught: list, caller) -> None:
    for message, category, filename, lineno in caught:
        at_caller = (filename.startswith(_HERE) or filename == _OVERRIDES) and caller is not None
        if at_caller:
            filename, lineno = caller.f_code.co_filename, caller.f_lineno
        glob = caller.f_globals if at_caller else None
        warnings.warn_explicit(message, category, filename, lineno,
                               module=glob.get("__name__") if glob is not None else None,
                               registry=glob.setdefault("__warningregistry__", {})
                               if glob is not None else None,
                               module_globals=glob)
