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


def test_the_heat_strip_has_a_cell_per_step_and_bin_holding_its_share():
    from tapeviz.draw.run_figures import histogram_figure
    rng = np.random.default_rng(1)
    counts = [histogram(rng.normal(0, 10.0 ** -k, 100)) for k in range(5)]
    fig = histogram_figure([1, 2, 3, 4, 5], counts, bin_labels(), "dense/kernel")
    z = np.array(fig.data[0].z)
    assert z.shape == (len(bin_labels()), 5)
    assert np.allclose(z.sum(axis=0), 1.0)
    # smaller gradients step by step: the busiest bin moves toward zero (the middle)
    middle = len(bin_labels()) // 2
    distance = [abs(int(np.argmax(z[middle + 1:, s]))) for s in range(5)]
    assert distance == sorted(distance, reverse=True)
