"""A practitioner's own multi-file project, written into a folder for the tests: a package
of its own (a tape inside it), a data file beside the script, argparse options. It prints
every gradient it gets at full precision, so a plain `python main.py` run is the reference
a recording is checked against."""
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

FILES = {
    "trainer/__init__.py": "",
    "trainer/model.py": """
        import tensorflow as tf


        class Linear:
            def __init__(self, n_in):
                self.w = tf.Variable(tf.linspace(0.1, 0.4, n_in)[:, None], name="w")
                self.b = tf.Variable([0.05], name="b")

            def __call__(self, x):
                z = tf.matmul(x, self.w)
                return tf.tanh(z + self.b)
        """,
    "trainer/loop.py": """
        import tensorflow as tf

        from .losses import mse


        def train_step(model, x, y, lr):
            with tf.GradientTape() as tape:
                loss = mse(model(x), y)
            grads = tape.gradient(loss, [model.w, model.b])
            for v, g in zip([model.w, model.b], grads):
                v.assign_sub(lr * g)
            return loss, grads
        """,
    "trainer/losses.py": """
        import tensorflow as tf


        def mse(pred, y):
            err = pred - y
            return tf.reduce_mean(tf.square(err))
        """,
    "data.csv": "0.5,1.0,-0.5\n1.5,-1.0,0.25\n-0.5,2.0,0.75\n1.0,0.5,-0.25\n",
    "main.py": """
        import argparse
        import json
        import os
        import sys

        import tensorflow as tf

        from trainer.loop import train_step
        from trainer.model import Linear

        parser = argparse.ArgumentParser(description="fit a line")
        parser.add_argument("--lr", type=float, default=0.1)
        parser.add_argument("--steps", type=int, default=3)
        args = parser.parse_args()

        rows = [[float(v) for v in line.split(",")] for line in open("data.csv") if line.strip()]
        x = tf.constant([r[:2] for r in rows])
        y = tf.constant([[r[2]] for r in rows])
        here = os.path.dirname(os.path.abspath(__file__))
        print("argv", sys.argv, "main", __name__, os.path.basename(__file__),
              "path0", sys.path[0] == here, "cwd", os.getcwd() == here)
        model = Linear(2)
        for step in range(args.steps):
            loss, grads = train_step(model, x, y, args.lr)
            print("GRADS", json.dumps([g.numpy().tolist() for g in grads]))
            print("step", step, "loss", float(loss))
        with tf.GradientTape() as tape:
            final = tf.reduce_sum(model(x))
        print("GRADS", json.dumps([tape.gradient(final, model.b).numpy().tolist()]))
        """,
}


def write_project(folder: Path) -> Path:
    for name, text in FILES.items():
        path = folder / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text).lstrip("\n"))
    return folder


def line_of(folder: Path, file: str, text: str) -> int:
    """The 1-based line of `file` that holds `text`."""
    lines = (folder / file).read_text().splitlines()
    return next(i for i, line in enumerate(lines, 1) if text in line)


def plain_run(folder: Path, *args) -> str:
    """What `python main.py ARGS` prints, run from the project's folder: the reference."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["TF_CPP_MIN_LOG_LEVEL"] = "2"
    result = subprocess.run([sys.executable, "main.py", *args], cwd=folder, env=env,
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    return result.stdout


def printed_gradients(stdout: str) -> list:
    return [json.loads(line[len("GRADS "):]) for line in stdout.splitlines()
            if line.startswith("GRADS ")]


def recorded_gradients(recording: dict) -> list:
    """Each tape's gradient results as values, in the order the tapes were entered."""
    tensors = {t["id"]: t for t in recording["tensors"]}
    out = []
    for tape in recording["tapes"]:
        for call in tape["gradients"]:
            out.append([tensors[r["grad"]]["value"] for r in call["results"]])
    return out
