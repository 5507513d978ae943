"""Worker side: a PyTorch program recorded into the same recording as a TensorFlow one.

PyTorch is an optional extra (`pip install .[torch]`): nothing here is imported until the
program itself imports `torch`. Then a TorchFunctionMode (forward.py) records each torch
call the program makes as an op, and each `backward()` or `torch.autograd.grad` call walks
the autograd graph it runs (backward.py): its nodes as the backward ops, `.grad` (or what
`grad` returned) as the gradient results, the graph's forward ops as one tape. The records
go into the run's Session beside TensorFlow's, so the run view, the inspector and the diff
read them as they read a tape's.
"""
from __future__ import annotations

import contextlib

__all__ = ["armed"]


class _Arming:
    """Starts the capture the first time the program imports torch (user_import.py asks),
    and ends it when the program ends."""

    def __init__(self, session):
        self.session, self.capture = session, None

    def __call__(self) -> None:
        if self.capture is not None:
            return
        try:
            from .forward import Capture
            self.capture = Capture(self.session)
            self.capture.start()
        except Exception as e:     # noqa: BLE001 - the program runs on, unrecorded
            self.capture = None
            self.session.fault("could not follow PyTorch's autograd", e)

    def stop(self) -> None:
        if self.capture is not None:
            self.capture.stop()


@contextlib.contextmanager
def armed(session):
    """While the program runs: `session.on_torch()` starts the PyTorch capture."""
    arming = _Arming(session)
    session.on_torch = arming
    try:
        yield arming
    finally:
        arming.stop()
        session.on_torch = None
