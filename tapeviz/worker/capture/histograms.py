"""Fixed-bin histograms of gradient (or activation) values: a bounded per-step summary of a
tensor, not the tensor. NumPy only, so the training page may bin its own values the same way.

The bins are fixed for the whole run, so a heat strip (steps x bins) lines steps up: values
are binned by sign and by log10 of their magnitude, from 1e-8 to 1e+4 in EDGES_PER_DECADE
bins a decade, with one bin for |v| < 1e-8 (zero, and a dead ReLU's gradients) in the middle
and the ends open (an exploding gradient lands in the outermost bin, not off the chart).
"""
from __future__ import annotations

import numpy as np

LOW, HIGH = -8, 4            # log10 of the smallest and largest magnitudes given their own bins
EDGES_PER_DECADE = 2


def magnitude_edges() -> np.ndarray:
    """The magnitude edges, 1e-8 ... 1e+4, shared by both signs."""
    return np.logspace(LOW, HIGH, (HIGH - LOW) * EDGES_PER_DECADE + 1)


def bin_labels() -> list:
    """A word for each bin, in order: negative magnitudes largest first, zero, positive."""
    edges = magnitude_edges()
    neg = [f"-{edges[i]:.0e}" for i in range(len(edges) - 1, 0, -1)]
    pos = [f"+{edges[i]:.0e}" for i in range(1, len(edges))]
    return neg + ["0"] + pos


def histogram(values) -> list:
    """Counts of `values` (any shape, finite or not; NaN is not counted) in bin_labels()'s
    bins: a list of ints, the same length for every tensor."""
    v = np.asarray(values, dtype=np.float64).ravel()
    v = v[~np.isnan(v)]
    edges = magnitude_edges()
    inner = len(edges) - 1
    mag = np.abs(v)
    # bin i of a side holds magnitudes in (edges[i], edges[i+1]]; beyond the top edge: the last
    side = np.clip(np.searchsorted(edges, mag, side="left") - 1, 0, inner - 1)
    zero = mag < edges[0]
    neg = np.bincount(side[(v < 0) & ~zero], minlength=inner)[::-1]
    pos = np.bincount(side[(v > 0) & ~zero], minlength=inner)
    return [int(c) for c in neg] + [int(zero.sum())] + [int(c) for c in pos]
