"""tapeviz: a visual debugger for TensorFlow 2 eager execution and GradientTape.

Importing this package never imports TensorFlow; `capture()` does, when called (the
worker side), and the app's Streamlit process never calls it.

    import tapeviz
    with tapeviz.capture() as rec:      # records this block, in this process and thread
        ...
    rec.save("run.json")                # the command line's recording contract
    tapeviz.figure(rec)                 # a plotly Figure; Jupyter shows it inline
"""
__version__ = "0.1.0"
__all__ = ["capture", "figure"]


def capture(max_ops: int = 20_000, tapes=None):
    """A context manager recording its block in this process (see tapeviz.worker.api).
    `tapes=(A, B)` records only top-level tapes A to B-1, as `record --tapes A:B`."""
    from .worker import api          # imports TensorFlow: only now, when asked for
    return api.capture(max_ops=max_ops, tapes=tapes)


def figure(rec, tape=None, call=None, group=None, view="graph", width=None, height=None):
    """A plotly Figure of a recording (a capture, a Recording, its dict, or a JSON path):
    the op graph of a tape, or the gradient flow of its `call`-th gradient call; with
    view="run", the loss and each variable's gradient norm over every step of the run.
    width and height (px): the graph's size, its labels placed to fit it."""
    from .draw import overview
    return overview.figure(rec, tape=tape, call=call, group=group, view=view, width=width,
                           height=height)
