"""The training stream: typed records of one training run and their JSON form.

The contract (schema `tapeviz.metrics/1`) shared by the worker's training loop, the
training page and `python -m tapeviz train --out`. Non-finite numbers are written as the
recording writes them ("nan", "inf", "-inf"; see recording.encode_float). No TensorFlow.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Optional

import numpy as np

from .recording import as_float, encode_float

SCHEMA = "tapeviz.metrics/1"
# The fixed bins of a step's gradient histograms (`Step.grad_hist`): edges at half powers of
# ten of |gradient value| from 10^-10 to 10^2, so that bin 0 holds what is below 10^-10 (0
# included) and the last bin what is at 10^2 or above; NaN and Inf are not counted (the
# norms and warnings say so). Fixed, so that every step's column reads on one scale.
HIST_EDGES_LOG10 = tuple(k / 2 for k in range(-20, 5))
HIST_BINS = len(HIST_EDGES_LOG10) + 1
PREDICTION_COUNT = 16        # held-out digits shown with their predictions (`Predictions`)
_EDGES = 10.0 ** np.asarray(HIST_EDGES_LOG10)


def histogram(values) -> list:
    """`values` (an array of any shape) counted in the fixed bins of |value|: HIST_BINS
    ints, NaN and Inf left out. The training loop and the recorder's step summaries bin
    alike, so one heat strip draws either."""
    a = np.abs(np.asarray(values).ravel())
    a = a[np.isfinite(a)]
    return np.bincount(np.searchsorted(_EDGES, a, side="right"), minlength=HIST_BINS).tolist()


@dataclass(frozen=True)
class Start:
    """Once, before the first step: the data, the model, and the one-step program."""
    type = "start"
    source: str
    model: str
    params: int
    train_size: int
    test_size: int
    epochs: int
    batch_size: int
    total_steps: int
    notes: list = field(default_factory=list)
    image_shape: list = field(default_factory=list)
    variables: list = field(default_factory=list)
    step_program: str = ""
    schema: str = SCHEMA         # so a saved stream says what it is on its first line


@dataclass(frozen=True)
class Step:
    """One training step: its loss and each variable's gradient norm; on some steps the
    histogram of each variable's gradient values too (added in place: older readers ignore it)."""
    type = "step"
    step: int
    epoch: int
    loss: float
    grad_norms: dict            # variable path -> L2 norm of its gradient
    steps_per_s: float
    elapsed_s: float            # training time: evaluations and pauses left out
    total_steps: int
    grad_hist: dict = field(default_factory=dict)   # path -> HIST_BINS counts of |value|
    # on the same steps: layer name -> HIST_BINS counts of |its output| on the step's batch
    act_hist: dict = field(default_factory=dict)


@dataclass(frozen=True)
class Eval:
    """Accuracy and loss on the held-out digits."""
    type = "eval"
    step: int
    epoch: int
    accuracy: float
    loss: float
    epoch_end: bool


@dataclass(frozen=True)
class Predictions:
    """A few held-out digits (8-bit pixels) with their true and predicted classes."""
    type = "predictions"
    step: int
    images: list
    true: list
    pred: list


@dataclass(frozen=True)
class Warning:  # noqa: A001 - the stream's own word; the builtin is not used here
    """A gradient or loss going wrong: vanishing, exploding or nan (`layer` None: the loss)."""
    type = "warning"
    step: int
    kind: str
    message: str
    layer: Optional[str] = None


@dataclass(frozen=True)
class Snapshot:
    """The answer to `snapshot PATH`: the program that takes the run's next step, or why not."""
    type = "snapshot"
    step: int
    path: Optional[str] = None
    step_program: Optional[str] = None
    error: Optional[str] = None


@dataclass(frozen=True)
class Done:
    """The last record: why the run ended (finished, stopped, nan) and its training time."""
    type = "done"
    step: int
    reason: str
    elapsed_s: float


KINDS = {cls.type: cls for cls in (Start, Step, Eval, Predictions, Warning, Snapshot, Done)}
_FLOATS = {"loss", "accuracy", "steps_per_s", "elapsed_s"}
_INTS = {"step", "epoch", "params", "train_size", "test_size", "epochs", "batch_size",
         "total_steps"}


class MetricsError(ValueError):
    """A record that is not one of this schema's (an unknown type, a missing field)."""


def to_json(record) -> dict:
    """The strict-JSON form: `type` first, non-finite floats as strings."""
    out = {"type": record.type}
    for f in dataclasses.fields(record):
        value = getattr(record, f.name)
        if f.name == "grad_norms":
            value = {k: encode_float(v) for k, v in value.items()}
        elif isinstance(value, float):
            value = encode_float(value)
        out[f.name] = value
    return out


def from_json(d) -> object:
    """A typed record from its JSON form (fields a newer writer added are ignored);
    MetricsError when `d` is none of this schema's records."""
    cls = KINDS.get(d.get("type")) if isinstance(d, dict) else None
    if cls is None:
        raise MetricsError(f"not a training record: {str(d)[:80]!r}")
    values = {}
    try:
        for f in dataclasses.fields(cls):
            if f.name not in d:
                continue
            value = d[f.name]
            if f.name in _FLOATS:
                value = float(as_float(value))
            elif f.name in _INTS:
                value = int(value)
            elif f.name == "grad_norms":
                value = {str(k): float(as_float(v)) for k, v in dict(value).items()}
            elif f.name in ("grad_hist", "act_hist"):
                value = {str(k): _counts(v) for k, v in dict(value).items()}
            values[f.name] = value
        return cls(**values)
    except (TypeError, ValueError) as exc:
        raise MetricsError(f"a {cls.type} record with a bad field: {exc}") from None


def _counts(value) -> list:
    """One histogram: HIST_BINS counts, each a whole number >= 0."""
    counts = [int(c) for c in value]
    if len(counts) != HIST_BINS or min(counts) < 0:
        raise ValueError(f"a histogram needs {HIST_BINS} counts >= 0")
    return counts


def as_dict(record) -> dict:
    """Plain data for the page and its charts: `type` and the fields, floats as floats.
    A snapshot leaves out what it does not have (a failed one has only `error`)."""
    out = {"type": record.type, **{f.name: getattr(record, f.name)
                                  for f in dataclasses.fields(record)}}
    if isinstance(record, Snapshot):
        out = {k: v for k, v in out.items() if v is not None}
    return out
