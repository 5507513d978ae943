"""Per-variable gradient norms step by step, judged: vanishing, exploding, NaN. The training
page's worker and the run view of a recording (draw/run_figures.py) decide alike. No
TensorFlow here.
"""
from __future__ import annotations

import math

import numpy as np

from . import metrics

EARLY_STEPS = 10            # steps whose gradient norms set a variable's "early level"
COLLAPSE_FACTOR = 1e-3      # three orders of magnitude below the early level: vanishing
EXPLODE_FACTOR = 1e3        # three orders above it: exploding


class GradientWatch:
    """Turns per-variable gradient norms into warnings, at most one per layer and kind.

    A variable's early level is the median of its norm over the first EARLY_STEPS steps
    while it was alive (norm above 0): a learning rate of 1.0 kills the guide CNN's layers
    by step 4, and the zeros after must not make the level 0, which would hide the death it
    is there to show. A collapse or blow-up is judged against it from the step that sets it,
    so a layer that starts small is not flagged.
    """

    def __init__(self):
        self.early: dict = {}
        self.history: dict = {}
        self.warned: set = set()

    def check(self, step: int, loss: float, norms: dict) -> list:
        warnings = []
        if not math.isfinite(loss):
            warnings += self._warn(step, None, "nan", f"the loss became {loss} at step {step}")
        for path, norm in norms.items():
            layer = path.rsplit("/", 1)[0]
            if not math.isfinite(norm):
                warnings += self._warn(step, layer, "nan" if math.isnan(norm) else "exploding",
                                       f"gradient norm of {path} is {norm} at step {step}")
                continue
            if path not in self.early:
                seen = self.history.setdefault(path, [])
                seen.append(norm)
                if len(seen) < EARLY_STEPS:
                    continue
                alive = [n for n in seen if n > 0]
                self.early[path] = float(np.median(alive)) if alive else 0.0
                del self.history[path]      # never alive: run_figures.judge calls it dead
            early = self.early[path]
            if early > 0 and norm == 0:
                warnings += self._warn(step, layer, "vanishing",
                                       f"no gradient reaches {path} any more (its norm is 0, from "
                                       f"{early:.3g} early on): the layer is dead")
            elif early > 0 and norm < early * COLLAPSE_FACTOR:
                warnings += self._warn(step, layer, "vanishing",
                                       f"gradient norm of {path} fell to {norm:.3g} from {early:.3g} early on")
            elif early > 0 and norm > early * EXPLODE_FACTOR:
                warnings += self._warn(step, layer, "exploding",
                                       f"gradient norm of {path} rose to {norm:.3g} from {early:.3g} early on")
        return warnings

    def _warn(self, step, layer, kind, message) -> list:
        if (layer, kind) in self.warned:
            return []
        self.warned.add((layer, kind))
        return [metrics.Warning(step=step, layer=layer, kind=kind, message=message)]
