"""Error hints: a plain-language fix beside an error the program raised (a second
gradient() on a non-persistent tape, TF1's Session, PyTorch), Python's "Did you mean",
and the note when a run drew no graph. No Streamlit, no TensorFlow."""
from __future__ import annotations

import ast
import difflib
import re
from typing import Optional

_TF1_NAMES = ("placeholder", "Session", "InteractiveSession", "get_variable", "variable_scope",
              "global_variables_initializer", "contrib", "to_float", "layers.dense",
              "train.GradientDescentOptimizer", "train.AdamOptimizer")

TF1_HINT = ("This is TensorFlow 1 graph-and-Session code. TensorFlow 2 runs eagerly: ops "
            "return values at once, so there is no placeholder to feed and no Session to run. "
            "Write plain Python with tensors (x = tf.constant(...); y = tf.matmul(x, w)) and "
            "tf.GradientTape for gradients, or keep the old code under tf.compat.v1 inside "
            "`with tf.Graph().as_default():`.")

NONPERSISTENT_HINT = ("A GradientTape is non-persistent by default: it frees what it recorded "
                      "after the first gradient() call. Create it with "
                      "tf.GradientTape(persistent=True) to ask it more than once (and `del tape` "
                      "when done), or get all gradients in one call: "
                      "tape.gradient(y, [a, b]).")

PERSISTENT_INSIDE_HINT = ("gradient() was called inside the `with` block of a persistent tape: the "
                          "tape records the gradient computation too, which costs time and "
                          "memory. Call it after the block, unless you want higher-order "
                          "derivatives.")

TORCH_HINT = ("PyTorch is not installed where this ran. tapeviz records PyTorch programs "
              "when it is: `pip install .[torch]` in tapeviz's folder (or `pip install torch`), "
              "then run again. The tape version of PyTorch's `loss.backward()` then `w.grad` "
              "is: `with tf.GradientTape() as tape: loss = f(w)` and then `grad = "
              "tape.gradient(loss, w)`, with `w = tf.Variable(...)` in place of "
              "`requires_grad=True`. Its `torch.tensor` is `tf.constant`, `nn.Linear` is "
              "`tf.keras.layers.Dense`, and `optimizer.step()` is "
              "`optimizer.apply_gradients(zip(grads, variables))`.")

_FOR_LOOP = re.compile(r"^\s*for\b.+\bin\b", re.M)


def _loops_over_data(source: str) -> bool:
    return bool(_FOR_LOOP.search(source)) and ("tf.data" in source or "dataset" in source.lower())


def did_you_mean(exc: BaseException) -> str:
    """Python's own "Did you mean: 'dy_dx'?" for a NameError, which Python 3.11 adds only
    when it prints a traceback: the closest name visible where the error was raised."""
    name = getattr(exc, "name", None)
    tb = exc.__traceback__
    if not isinstance(exc, NameError) or not name or tb is None:
        return ""
    while tb.tb_next is not None:
        tb = tb.tb_next
    frame = tb.tb_frame
    builtins = frame.f_builtins if isinstance(frame.f_builtins, dict) else {}
    seen = [*frame.f_locals, *frame.f_globals, *builtins]
    close = difflib.get_close_matches(name, [n for n in seen if not n.startswith("__")], n=1,
                                      cutoff=0.75)
    return f". Did you mean: '{close[0]}'?" if close else ""


# Keras's MNIST download failed (offline): how tapeviz serves the program a local copy. The
# data chain (tapeviz/data.py, worker/datasets.py) serves it only as Keras's very arrays.
MNIST_OFFLINE_HINT = (
    "Keras could not download MNIST: this machine is offline or cannot reach Google's "
    "storage. Give it a local copy and the program runs unchanged: put Keras's own file at "
    "~/.keras/datasets/mnist.npz (Keras then reads its cache by itself), or set "
    "TAPEVIZ_MNIST_DIR to a folder holding mnist.npz or MNIST's four IDX files "
    "(train-images-idx3-ubyte.gz, train-labels-idx1-ubyte.gz, t10k-images-idx3-ubyte.gz, "
    "t10k-labels-idx1-ubyte.gz), and tapeviz serves `mnist.load_data()` from it, the same "
    "60,000 training and 10,000 test digits Keras returns (a copy that is not all of MNIST "
    "is not served).")


def error_hint(error_type: str, message: str, line_text: str = "", source: str = "") -> Optional[str]:
    """A plain-language explanation and fix for mistakes learners make, or None."""
    text = f"{message}\n{line_text}"
    if "non-persistent GradientTape can only be used" in message:
        return _asked_twice(line_text, source) or NONPERSISTENT_HINT
    if error_type == "AttributeError" and "tensorflow" in message and any(
            f"'{n.split('.')[0]}'" in message for n in _TF1_NAMES):
        return TF1_HINT
    if "placeholder() is not compatible with eager" in message or \
            "Session graph is empty" in message or "tf.compat.v1.Session" in text:
        return TF1_HINT
    if error_type == "ModuleNotFoundError" and re.search(r"'(torch|torchvision)[.']", message):
        return TORCH_HINT
    m = re.search(r"Matrix size-incompatible: In\[0\]: \[([\d,]+)\], In\[1\]: \[([\d,]+)\]", message)
    if m:
        a, b = m.group(1).split(","), m.group(2).split(",")
        return (f"tf.matmul(a, b) needs a's last dimension to equal b's first: here a is "
                f"[{', '.join(a)}] and b is [{', '.join(b)}] ({a[-1]} != {b[0]}). Transpose one "
                f"(tf.transpose, or transpose_b=True) or reshape so the inner dimensions match.")
    if error_type == "EOFError" and "when reading a line" in message:    # input()'s words
        return ("The program asked for input with `input()`, but a recorded program has no "
                "keyboard to type into: its input is empty. Put the value in the code "
                "instead, for example `name = \"Ada\"`.")
    if "URL fetch failure" in message and "mnist.npz" in message:
        return MNIST_OFFLINE_HINT
    if error_type == "Timeout" and _loops_over_data(source):
        return ("The program was stopped at its time limit in the middle of a loop over its "
                "data; what it printed and the steps recorded until then are kept. A whole "
                "epoch takes minutes, longer than the limit: to see a step's tape, loop over "
                "`dataset.take(3)` rather than hundreds of batches; to train in full, run it "
                "with `python -m tapeviz record` and a longer `--timeout`.")
    if error_type == "Timeout":
        return ("The program was stopped at its time limit. Look for a loop that never ends "
                "(a `while` whose condition never turns false), or make the work smaller.")
    if error_type == "NameError":
        m = re.search(r"Did you mean: '(\w+)'", message)
        return ("Python does not know this name at this point: it is misspelt, or it is "
                "assigned only later (or inside a function)."
                + (f" Python's guess is `{m.group(1)}`." if m else ""))
    if error_type == "SyntaxError":
        return "Python could not parse the program: check the line shown for a typo."
    return None


def no_graph_note(error_type: Optional[str], tensors: int) -> str:
    """Why a recording has no op to draw, without contradicting its error."""
    if error_type in ("WorkerCrash", "WorkerError", "RunnerError", "Cancelled"):
        return "Nothing was recorded, so there is no graph: see the message above."
    if error_type is not None:
        return "The program stopped before any TensorFlow op ran, so there is no graph."
    # A tf.constant is made without an op (and the recorder keeps no tensor no op used), so
    # a program of constants and prints lands here: say what it did, not that it did nothing.
    return ("Making tensors with `tf.constant` or `tf.Variable`, and printing them, is all "
            "this program did: that runs no op, so there is no graph yet. An op such as "
            "`x * 2`, `tf.matmul` or `tape.gradient` draws one.")



def _asked_twice(line_text: str, source: str) -> Optional[str]:
    """NONPERSISTENT_HINT in the program's own names: the tape's, its target's and its
    sources' as the gradient() calls wrote them. One call can give gradients of one target
    with respect to many sources; two targets need a persistent tape. None when the calls
    cannot be read back from the source."""
    calls = _gradient_calls(source)
    failed = _gradient_calls(line_text.strip())
    if not failed or not calls:
        return None
    tape, target, _ = failed[0]
    asked = [(t, s) for name, t, s in calls if name == tape]
    sources = [s for t, s in asked if t == target]
    head = (f"`{tape}` is a non-persistent GradientTape: it frees what it recorded after its "
            "first gradient() call, so asking it again fails.")
    if len({t for t, _ in asked}) == 1 and len(sources) > 1:
        return (f"{head} Get all the gradients in one call, "
                f"`{tape}.gradient({target}, [{', '.join(sources)}])`, or create it with "
                f"`tf.GradientTape(persistent=True)` (and `del {tape}` when done).")
    return (f"{head} Create it with `tf.GradientTape(persistent=True)` to ask it for "
            + " and ".join(f"d{t}/d{s}" if t.isidentifier() and s.isidentifier() else f"the gradient of {t}"
                           for t, s in dict.fromkeys(asked)) + f" (and `del {tape}` when done).")


def _gradient_calls(source: str) -> list:
    """[(tape, target, source)] of every `tape.gradient(target, source)` in `source`, in
    order, as written; a list of sources gives one entry per element."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return []
    found = []
    for node in ast.walk(tree):
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                and node.func.attr == "gradient" and isinstance(node.func.value, ast.Name)
                and len(node.args) >= 2):
            arg = node.args[1]
            items = arg.elts if isinstance(arg, (ast.List, ast.Tuple)) else [arg]
            found += [(node.lineno, node.col_offset, node.func.value.id, ast.unparse(node.args[0]), ast.unparse(a))
                      for a in items]
    return [entry[2:] for entry in sorted(found)]
