"""The notebook's front door (tapeviz.compare and the questions): recordings in any form the
package takes, answers as a pandas DataFrame when pandas is installed, plain rows otherwise."""
from __future__ import annotations

from typing import Optional

from ..draw.overview import as_recording
from ..words import compare as words
from . import match, questions

COLUMNS = ("status", "line_a", "line_b", "op", "name", "shape_a", "shape_b", "value_diff",
           "value_mark", "grad_diff", "grad_mark", "code", "a", "b", "phase", "repeat")


def table(rows: list, sentence: Optional[str] = None):
    """A DataFrame of the rows (its attrs["sentence"] the comparison's words), or the rows."""
    try:
        import pandas
    except ImportError:
        return rows
    frame = pandas.DataFrame(rows).convert_dtypes()   # lines stay whole numbers beside a missing one
    if sentence:
        frame.attrs["sentence"] = sentence
    return frame


def comparison(a, b=None, rtol: float = match.RTOL, step_a: Optional[int] = None,
               step_b: Optional[int] = None) -> match.Comparison:
    """A compared with B (B defaults to A, for two steps of one run)."""
    rec_a = as_recording(a)
    rec_b = rec_a if b is None else as_recording(b)
    return match.compare(rec_a, rec_b, rtol=rtol, step_a=step_a, step_b=step_b)


def compare(a, b=None, rtol: float = match.RTOL, step_a: Optional[int] = None,
            step_b: Optional[int] = None, matched_only: bool = False):
    """One row per op (matched, or on one side only unless `matched_only`): line in A and
    B, op, shapes, max relative difference of value and gradient and their marks."""
    cmp = comparison(a, b, rtol, step_a, step_b)
    rows = [{k: r.as_dict()[k] for k in COLUMNS} for r in cmp.rows
            if not matched_only or (r.a is not None and r.b is not None)]
    names = words.side_names(cmp.step_a, cmp.step_b, same_file=b is None or a is b)
    return table(rows, words.divergence(cmp, names))


def figure(a, b, width=None, height=None, rtol: float = match.RTOL):
    """Both graphs side by side, ringed by difference, the first divergence called out."""
    from ..draw import compare_figures
    cmp = comparison(a, b, rtol)
    names = words.side_names(cmp.step_a, cmp.step_b)
    return compare_figures.side_by_side(cmp, names, words.divergence(cmp, names),
                                        width=width or 1400, height=height or 560)


def first_nan(rec) -> Optional[dict]:
    return questions.first_nan(as_recording(rec))


def none_gradients(rec):
    return table(questions.none_gradients(as_recording(rec)))


def gradient_audit(rec, vanishing: float = questions.VANISHING, exploding: float = questions.EXPLODING,
                   per_step: bool = False):
    return table(questions.gradient_audit(as_recording(rec), vanishing, exploding, per_step))
