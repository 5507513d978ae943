"""The examples' recordings, made once per TensorFlow version and kept on disk: a fresh
server draws its first page (the bare address, `?example=NAME`) from them at once, without
waiting for a worker to import TensorFlow. No Streamlit and no TensorFlow here: the version
comes from the package's metadata, the recordings from workers, and every file read back
goes through the one reader (recording_gate.read), in hosted mode too.

A recording is kept under a key of everything that shapes it: the TensorFlow, NumPy and
Python versions, the recorder's own code, the program, and the limits it ran under. So a
new TensorFlow, a changed recorder or other limits make a new one, never a stale picture.
"""
from __future__ import annotations

import hashlib
import json
import logging
import os
import sys
import threading
from dataclasses import dataclass
from functools import lru_cache
from importlib import metadata
from pathlib import Path
from typing import Callable, Iterable, Optional

from .. import recording_gate as gate
from .config import Config
from .jobs import KEEP_STEPS, Recorded

ENV = "TAPEVIZ_CACHE_DIR"     # the cache's folder; "off" keeps no cache at all
OWNER = "example-cache"       # the owner of the runs that fill it (server/queues.py's shares)
# Error types the runner gives a recording it cut short: a fault of that run, not of the
# program, so never kept for anyone else.
CUT_SHORT = frozenset({"Cancelled", "Timeout", "WorkerError", "WorkerCrash", "RunnerError",
                       "ProtocolError", "TooManyJobs"})
_TF_NAMES = ("tensorflow", "tensorflow-cpu", "tensorflow-intel", "tensorflow-macos",
             "tf-nightly", "tf-nightly-cpu")
_PACKAGE = Path(__file__).resolve().parent.parent
log = logging.getLogger("tapeviz.runner")


@dataclass(frozen=True)
class Cached:
    """The event a page follows before a recording from the cache: made with this
    TensorFlow, earlier, not by a run of this page's."""
    tensorflow: str


def keepable(recorded: Optional[Recorded]) -> bool:
    """A recording another page may be shown: the program's own end, not a cut run's."""
    if recorded is None:
        return False
    error = recorded.recording.error
    return error is None or error.type not in CUT_SHORT


def folder(env=os.environ) -> Optional[Path]:
    """Where the recordings live: TAPEVIZ_CACHE_DIR, else the user's cache folder
    (XDG_CACHE_HOME or ~/.cache) under tapeviz/examples; None when turned off."""
    chosen = env.get(ENV, "").strip()
    if chosen.lower() == "off":
        return None
    if chosen:
        return Path(chosen)
    base = env.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "tapeviz" / "examples"


@lru_cache(maxsize=1)
def tensorflow_version() -> Optional[str]:
    """The installed TensorFlow's version, from its metadata (importing it takes seconds)."""
    for name in _TF_NAMES:
        try:
            return metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    for name in metadata.packages_distributions().get("tensorflow", ()):
        return metadata.version(name)
    return None


def _version(name: str) -> str:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return ""


@lru_cache(maxsize=1)
def recorder_digest() -> str:
    """The recorder's code (worker/ and the contract): a change there is a new recording."""
    digest = hashlib.sha256()
    files = sorted((_PACKAGE / "worker").rglob("*.py")) + [_PACKAGE / "recording.py"]
    for path in files:
        digest.update(str(path.relative_to(_PACKAGE)).encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()


def key(source: str, config: Config, tf_version: str) -> str:
    """The name of `source`'s recording as `config`'s runs would record it."""
    limits = config.limits
    shaped_by = {"tensorflow": tf_version, "numpy": _version("numpy"),
                 "python": list(sys.version_info[:3]), "recorder": recorder_digest(),
                 "source": source, "mode": config.mode, "timeout_s": limits.timeout_s,
                 "max_ops": limits.max_ops, "max_stdout": limits.max_stdout,
                 "keep_steps": KEEP_STEPS}
    return hashlib.sha256(json.dumps(shaped_by, sort_keys=True).encode()).hexdigest()[:32]


class ExampleCache:
    """The examples' recordings in `where`, for `config`'s runs. `lookup(source)` gives a
    kept one, read through the gate once per process; `build(sources, record)` records the
    missing ones in workers, one after the other."""

    def __init__(self, config: Config, where: Optional[Path] = None,
                 tf_version: Optional[str] = None):
        self.config = config
        self.where = where if where is not None else folder()
        self.tensorflow = tf_version if tf_version is not None else tensorflow_version()
        self._lock = threading.Lock()
        self._read: dict = {}          # key -> its Recorded, once read through the gate

    @property
    def on(self) -> bool:
        return self.where is not None and bool(self.tensorflow)

    def path(self, source: str) -> Path:
        return self.where / f"{key(source, self.config, self.tensorflow)}.json"

    def lookup(self, source: str) -> Optional[tuple]:
        """(Cached, Recorded) for `source` when a recording of it is kept, else None. A file
        the gate refuses is ignored (and rebuilt by the next `build`)."""
        if not self.on:
            return None
        path = self.path(source)
        with self._lock:
            found = self._read.get(path.name)
        if found is None:
            try:
                data = path.read_bytes()
                found = Recorded(*gate.read(data, path.name, self.config.limits.max_ops,
                                            self.config.limits.max_stdout))
            except (OSError, gate.Unreadable):
                return None
            if found.recording.source != source:
                return None
            with self._lock:
                self._read[path.name] = found
        return Cached(self.tensorflow), found

    def keep(self, source: str, recorded: Recorded) -> bool:
        """Write `source`'s recording (atomically: a reader never meets half a file)."""
        if not self.on or not keepable(recorded):
            return False
        path = self.path(source)
        try:
            text = json.dumps(recorded.data, allow_nan=False, separators=(",", ":"))
            path.parent.mkdir(parents=True, exist_ok=True)
            part = path.with_suffix(f".{os.getpid()}.{threading.get_ident()}.part")
            part.write_text(text, encoding="utf-8")
            os.replace(part, path)
        except (OSError, ValueError, TypeError) as exc:
            log.warning("tapeviz: could not keep an example's recording: %s", exc)
            return False
        with self._lock:
            self._read[path.name] = recorded
        return True

    def build(self, sources: Iterable[str], record: Callable[[str], Iterable]) -> int:
        """Record each of `sources` not kept yet, in order (`record(source)`: the events of
        its run) and keep what ends as the program ends. Returns how many were kept."""
        kept = 0
        for source in sources:
            if not self.on:
                break
            if self.lookup(source) is not None:
                continue
            recorded = None
            for event in record(source):
                if isinstance(event, Recorded):
                    recorded = event
            kept += self.keep(source, recorded) if recorded is not None else 0
        return kept

    def build_in_background(self, sources: Iterable[str],
                            record: Callable[[str], Iterable]) -> Optional[threading.Thread]:
        if not self.on:
            return None

        def fill():
            try:
                self.build(list(sources), record)
            except Exception:     # noqa: BLE001 - the pages run their own; say why once
                log.exception("tapeviz: building the examples' recordings failed")

        thread = threading.Thread(target=fill, daemon=True, name="tapeviz-example-cache")
        thread.start()
        return thread
