"""`python -m tapeviz train`: the training page's loop, headless and in-process.

Prints one line per epoch and can write the metrics stream as JSON lines. TensorFlow
is imported only when the command runs, so building the parser stays cheap.
"""
from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

TRAIN_HELP = """\
Train a small CNN on MNIST with TensorFlow's eager custom training loop (GradientTape,
Adam), as the app's training page does, and print per-epoch loss and held-out accuracy.

data: --data DIR (IDX .gz files or mnist.npz), else $TAPEVIZ_MNIST_DIR, the Keras cache,
Keras's download, and scikit-learn's 8x8 digits when all else fails.

exit status: 0 trained; 1 the loss became NaN; 2 bad usage.
"""


def add_parser(subparsers) -> argparse.ArgumentParser:
    parser = subparsers.add_parser("train", help="train a small CNN on MNIST, eagerly",
                                   description=TRAIN_HELP,
                                   formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", choices=("guide", "lenet"), default="guide",
                        help="guide: the eager guide's conv-conv-pool-dense; lenet: conv-pool-conv-pool-dense")
    parser.add_argument("--epochs", type=int, default=1)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--lr", type=float, default=1e-3, help="Adam's learning rate")
    parser.add_argument("--data", metavar="DIR", help="a directory of MNIST IDX .gz files or an mnist.npz")
    parser.add_argument("--limit", type=int, help="use at most N digits (train + held-out)")
    parser.add_argument("--tf-function", action="store_true", help="wrap the train step in tf.function")
    parser.add_argument("--eval-every", type=int, default=0, metavar="STEPS",
                        help="also evaluate on the held-out digits every STEPS steps")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", metavar="metrics.jsonl", help="write every metrics record as a JSON line")
    parser.set_defaults(func=main)
    return parser


def usage_error(args) -> str:
    if args.epochs < 1 or args.batch_size < 1:
        return "--epochs and --batch-size must be at least 1"
    if not args.lr > 0:
        return "--lr must be positive"
    if args.limit is not None and args.limit < 2:
        return "--limit must be at least 2 (some to train on, some held out)"
    if args.data and not Path(args.data).expanduser().exists():
        return f"--data {args.data}: no such file or directory"
    return ""


def config_from(args) -> dict:
    return {"model": args.model, "epochs": args.epochs, "batch_size": args.batch_size,
            "learning_rate": args.lr, "use_tf_function": args.tf_function, "eval_every": args.eval_every,
            "seed": args.seed, "limit": args.limit, "data_dir": args.data}


class EpochPrinter:
    """Turns the record stream into one line per epoch (and the start, warnings, the end)."""

    def __init__(self):
        self.epoch_losses: list = []
        self.last_step: dict = {}
        self.epochs = 0
        self.reason = None

    def __call__(self, record: dict) -> None:
        kind = record["type"]
        if kind == "start":
            self.epochs = record.get("epochs", 0)
            print(f"data: {record['source']}")
            for note in record.get("notes", []):
                print(f"  (passed over {note})")
            print(f"model {record['model']}: {record['params']:,} parameters; "
                  f"{record['train_size']:,} train / {record['test_size']:,} held-out digits, "
                  f"{record['total_steps']:,} steps")
        elif kind == "step":
            self.epoch_losses.append(record["loss"])
            self.last_step = record
        elif kind == "eval" and record.get("epoch_end"):
            mean_loss = sum(self.epoch_losses) / max(1, len(self.epoch_losses))
            print(f"epoch {record['epoch']}/{self.epochs}: loss {mean_loss:.4f}, "
                  f"held-out accuracy {record['accuracy']:.2%} (loss {record['loss']:.4f}), "
                  f"{self.last_step.get('steps_per_s', 0):.1f} steps/s")
            self.epoch_losses = []
        elif kind == "warning":
            print(f"warning ({record['kind']}): {record['message']}", file=sys.stderr)
        elif kind == "done":
            self.reason = record["reason"]
            print(f"done after {record['step']} steps ({record['reason']}, {record['elapsed_s']:.1f} s training)")


def nan_as_null(value):
    """Strict JSON has no NaN or Infinity: write them as null (the warning record says why)."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: nan_as_null(v) for k, v in value.items()}
    if isinstance(value, list):
        return [nan_as_null(v) for v in value]
    return value


def main(args) -> int:
    problem = usage_error(args)
    if problem:
        print(f"tapeviz train: {problem}", file=sys.stderr)
        return 2
    from . import training  # imports TensorFlow: only now that there is training to do

    printer = EpochPrinter()
    out = open(args.out, "w", encoding="utf-8") if args.out else None
    try:
        def emit(record: dict) -> None:
            if out is not None:
                out.write(json.dumps(nan_as_null(record), allow_nan=False) + "\n")
            printer(record)

        training.run(config_from(args), emit)
    finally:
        if out is not None:
            out.close()
    return 1 if printer.reason == "nan" else 0
