"""The session recording this process now (under `tapeviz record`, the app's worker or
`tapeviz.capture()`), for tapeviz's helpers that a program calls itself (keras_watch.py):
their step summaries then join the run's, streamed live and kept in its recording.
"""
from __future__ import annotations

import contextlib
from typing import Optional

_sessions: list = []


def session():
    """The innermost session now recording, or None (a plain `python` run)."""
    return _sessions[-1] if _sessions else None


@contextlib.contextmanager
def recording(session) -> Optional[object]:
    _sessions.append(session)
    try:
        yield session
    finally:
        _sessions.remove(session)
