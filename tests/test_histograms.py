"""Fixed-bin gradient histograms against NumPy's own histogram over the same edges."""
import numpy as np

from tapeviz.worker.capture.histograms import bin_labels, histogram, magnitude_edges


def test_counts_match_numpys_histogram_on_each_side():
    rng = np.random.default_rng(0)
    values = np.concatenate([rng.normal(0, 1e-3, 5000), np.zeros(300), [1e9, -1e9, np.nan]])
    counts = histogram(values)
    assert len(counts) == len(bin_labels())
    edges = magnitude_edges()
    n = len(edges) - 1
    inner_edges = edges.copy()
    inner_edges[-1] = np.inf                   # the top bin is open
    pos = values[values >= edges[0]]
    neg = -values[values <= -edges[0]]
    assert counts[n + 1:] == list(np.histogram(pos, inner_edges)[0])
    assert counts[:n][::-1] == list(np.histogram(neg, inner_edges)[0])
    assert counts[n] == 300                     # zeros, e.g. a dead ReLU's gradients
    assert sum(counts) == len(values) - 1       # every value but the NaN
