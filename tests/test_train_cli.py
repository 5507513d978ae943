"""`python -m tapeviz train`, called through argparse in-process."""
import argparse
import json
from pathlib import Path

import pytest

from tapeviz.worker import train_cli

SHARED_MNIST = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "mnist"


def parse(*argv):
    parser = argparse.ArgumentParser()
    train_cli.add_parser(parser.add_subparsers(dest="command"))
    return parser.parse_args(["train", *argv])


def test_train_prints_epochs_and_writes_jsonl(tmp_path, capsys):
    if not (SHARED_MNIST / "t10k-images-idx3-ubyte.gz").is_file():
        pytest.skip(f"the real MNIST test set is not at {SHARED_MNIST}")
    out = tmp_path / "metrics.jsonl"
    args = parse("--model", "guide", "--epochs", "2", "--limit", "600", "--data", str(SHARED_MNIST),
                 "--tf-function", "--out", str(out))
    assert train_cli.main(args) == 0
    printed = capsys.readouterr().out
    assert "epoch 1/2: loss" in printed and "epoch 2/2: loss" in printed and "held-out accuracy" in printed
    records = [json.loads(line) for line in out.read_text().splitlines()]
    assert records[0]["type"] == "start" and records[-1]["type"] == "done"
    assert sum(r["type"] == "step" for r in records) == 2 * 15  # 480 train digits in batches of 32


@pytest.mark.parametrize("argv, complaint", [
    (("--data", "/no/such/dir"), "no such file"),
    (("--epochs", "0"), "--epochs"),
    (("--lr", "-1"), "--lr"),
    (("--limit", "1"), "--limit"),
])
def test_bad_usage_exits_2(argv, complaint, capsys):
    assert train_cli.main(parse(*argv)) == 2
    assert complaint in capsys.readouterr().err


def test_nan_values_become_null_in_strict_json():
    record = {"loss": float("nan"), "grad_norms": {"a": float("inf"), "b": 1.0}, "images": [[1, 2]]}
    assert json.dumps(train_cli.nan_as_null(record), allow_nan=False) == \
        '{"loss": null, "grad_norms": {"a": null, "b": 1.0}, "images": [[1, 2]]}'
