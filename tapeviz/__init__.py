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
__all__ = ["capture", "watch", "figure", "compare", "first_nan", "none_gradients", "gradient_audit"]


def capture(max_ops: int = 20_000, tapes=None):
    """A context manager recording its block in this process (see tapeviz.worker.api).
    `tapes=(A, B)` records only top-level tapes A to B-1, as `record --tapes A:B`."""
    from .worker import api          # imports TensorFlow: only now, when asked for
    return api.capture(max_ops=max_ops, tapes=tapes)


def watch(path="run.json", every_s: float = 2.0, max_ops: int = 20_000):
    """A context manager for a training loop of your own: records it as `tapeviz record`
    does by default (every step's loss and gradient norms, the first, newest and anomalous
    steps whole, the rest at close to plain speed), rewriting `path` every `every_s` while it
    runs so `tapeviz view --follow path` charts it live; the page's Stop raises
    KeyboardInterrupt in the loop, as Ctrl+C would. `with tapeviz.watch("run.json"): ...`"""
    from .worker import api          # imports TensorFlow: only now, when asked for
    return api.watch(path, every_s=every_s, max_ops=max_ops)


def compare(a, b=None, rtol=1e-5, step_a=None, step_b=None, matched_only=False):
    """One row per op of A matched with B's (B defaults to A: two steps of one run): line, op,
    shapes, max relative difference of value and gradient; a DataFrame with pandas."""
    from .matching import notebook
    return notebook.compare(a, b, rtol, step_a, step_b, matched_only)


def first_nan(rec):
    """The first NaN or Inf, forward or backward: op, line, inputs (a dict, or None)."""
    from .matching import notebook
    return notebook.first_nan(rec)


def none_gradients(rec):
    """Every None gradient with its reason, one row each."""
    from .matching import notebook
    return notebook.none_gradients(rec)


def gradient_audit(rec, vanishing=1e-7, exploding=1e4, per_step=False):
    """Each variable's gradient norm over the steps: zero, vanishing, exploding, NaN, None."""
    from .matching import notebook
    return notebook.gradient_audit(rec, vanishing, exploding, per_step)


def figure(rec, tape=None, call=None, group=None, view="graph", width=None, height=None, compare=None):
    """A plotly Figure of a recording (a capture, a Recording, its dict, or a JSON path):
    the op graph of a tape, or the gradient flow of its `call`-th gradient call; with
    view="run", the loss and each variable's gradient norm over every step of the run.
    width and height (px): the graph's size, its labels placed to fit it. compare=B: this
    recording and B side by side, ops ringed by how far they differ (tapeviz.compare)."""
    from .draw import overview
    if compare is not None:        # both recordings side by side, their differences ringed
        from .matching import notebook
        return notebook.figure(rec, compare, width=width, height=height)
    return overview.figure(rec, tape=tape, call=call, group=group, view=view, width=width,
                           height=height)
