"""`tapeviz.keras.Watch()`: each train step of `model.fit()` summarized at fit()'s own
compiled speed: the loss, each variable's gradient norm (the gradients Keras hands its
optimizer), and every STEP_HIST_EVERY-th step their histograms in the fixed bins.

fit()'s train step is a tf.function, so its gradients never exist in Python. The callback
wraps, on their instances (never the classes) and for the length of fit(), the `apply` of
each optimizer the model holds (a GAN's two as well) and the model's `compute_loss`, so that
the traced step also writes the norms, the loss and the binned values into variables of the
callback's own; it reads them after each step. The model's variables, its ops' inputs and
outputs and what fit() prints are those of the plain run: the extra ops only read the
gradients and write the callback's variables.

Each place a step hands an optimizer its gradients is a site of its own (its line in the
user's train_step, or the fit() line for Keras's default step), charted as its own series,
as the recorder charts a GAN's two tapes.

Where the summaries go (sink.py): into the run's recording when tapeviz records the program
(`tapeviz record`, the app), streamed live; otherwise into `path`, a recording of steps
rewritten every few seconds while fit() runs, which `tapeviz view --follow` draws live.
"""
from __future__ import annotations

import sys
from typing import Optional

import numpy as np
import tensorflow as tf

from .. import metrics
from ..recording import STEP_HIST_EVERY
from . import sink
from .frames import library_dirs

_EDGES = tf.constant(10.0 ** np.asarray(metrics.HIST_EDGES_LOG10), tf.float64)
NO_GRADIENT = -1.0        # a norm's slot when the variable's gradient was None


class Watch(tf.keras.callbacks.Callback):
    """Summarize every train step of `fit()`: `model.fit(x, y, callbacks=[Watch("run.json")])`.

    path: where the recording goes when tapeviz is not already recording this program
      (None: kept in `self.recording` only). Open it with `tapeviz view run.json`; with
      `--follow` the page redraws while fit() runs, and its Stop ends fit() after its step.
    every_s: how often the file is rewritten while fit() runs (the end always writes it).
    histograms: bin each variable's gradient values every STEP_HIST_EVERY-th step.
    """

    def __init__(self, path=None, every_s: float = 2.0, histograms: bool = True):
        super().__init__()
        self.path, self.every_s, self.histograms = path, every_s, histograms
        self.recording = None          # the Recording written last (a plain run)
        self._sink: Optional[sink.Sink] = None
        self._undo: list = []
        self._sites: dict = {}
        self._steps = 0

    # -- fit() begins: wrap, so the traced step writes what we read ----------------------------
    def on_train_begin(self, logs=None):
        model = self.model
        self._sites, self._steps, self._loss = {}, 0, None
        self._sink = sink.open_sink(self.path, _caller(), self.every_s)
        if self._sink.recorded_eagerly(model):
            # the recorder's own tape already summarizes each eager step at the fit() line
            self._sink.note("tapeviz.keras.Watch: the train steps ran eagerly under tapeviz, "
                            "whose tape summarizes them; the callback added nothing")
            return
        self._bins = self.histograms and not getattr(model, "jit_compile", False)
        # [the loss, 1 once compute_loss gave one], read after every step
        with self._sink.quiet():
            self._loss = tf.Variable(tf.constant([float("nan"), 0.0], tf.float64),
                                     trainable=False)
        for optimizer in _optimizers(model):
            self._wrap(optimizer, "apply" if hasattr(optimizer, "apply") else
                       "apply_gradients", lambda apply, o=optimizer: self._applying(o, apply))
        self._wrap(model, "compute_loss", self._computing_loss)
        model.make_train_function(force=True)      # trace the step anew, with the wrappers

    def _wrap(self, owner, name: str, make) -> None:
        original = getattr(owner, name, None)
        if original is None:
            return
        own = name in owner.__dict__
        object.__setattr__(owner, name, make(original))
        self._undo.append((owner, name, own, original))

    def _applying(self, optimizer, apply):
        def watched_apply(grads, *args, **kwargs):
            if apply.__name__ == "apply_gradients":          # (grad, variable) pairs
                pairs = list(grads)
                variables = [v for _, v in pairs]
                with self._sink.quiet():
                    self._site(optimizer, variables).keep(
                        [g for g, _ in pairs], variables, optimizer.iterations)
                return apply(pairs, *args, **kwargs)
            variables = args[0] if args else kwargs.get("trainable_variables")
            variables = list(variables) if variables is not None else \
                list(self.model.trainable_variables)
            grads = list(grads)
            with self._sink.quiet():
                self._site(optimizer, variables).keep(grads, variables, optimizer.iterations)
            return apply(grads, *args, **kwargs)
        return watched_apply

    def _site(self, optimizer, variables: list) -> "_Site":
        """The site of this call, made the first time it is traced: its variables, stash."""
        where = self._sink.where_of(sys._getframe(2))
        key = (id(optimizer), where)
        site = self._sites.get(key)
        if site is None:
            with tf.init_scope():       # made eagerly, also while the step is traced
                site = self._sites[key] = _Site(where, variables, self._sink, self._bins)
        return site

    def _computing_loss(self, compute_loss):
        def watched_compute_loss(*args, **kwargs):
            loss = compute_loss(*args, **kwargs)
            if kwargs.get("training", True) and loss is not None:
                with self._sink.quiet():     # built inside the tape's block: not its ops
                    self._loss.assign(tf.stack([tf.cast(tf.reduce_mean(loss), tf.float64),
                                                tf.constant(1.0, tf.float64)]))
            return loss
        return watched_compute_loss

    # -- after each step: read them ------------------------------------------------------------
    def on_train_batch_end(self, batch, logs=None):
        if self._sink is None or self._sink.passive:
            return
        with self._sink.quiet():
            read = [(site, site.read()) for site in self._sites.values()]
            loss, seen = self._loss.numpy()
        read = [(site, got) for site, got in read if got is not None]
        if not read:
            return                    # no step handed an optimizer gradients since the last
        if seen:
            loss = float(loss)
        elif len(self._sites) == 1:
            loss = _logged_loss(logs)
            self._sink.note_once("tapeviz.keras.Watch: the train step does not call "
                                 "compute_loss, so the loss charted is fit()'s running mean "
                                 "over the epoch, as its progress bar prints it")
        else:
            loss = None
            self._sink.note_once("tapeviz.keras.Watch: the train step does not call "
                                 "compute_loss, so each optimizer's loss is not known: its "
                                 "gradient norms are charted without it")
        for site, (norms, hist) in read:
            self._sink.add(site.tape, site.where, loss, site.sources, norms, hist)
        self._steps += 1
        if self._sink.stop_asked() and not self.model.stop_training:
            self.model.stop_training = True      # fit()'s own clean stop, after this step
            self._sink.note(f"stopped from the page after step {self._steps:,}: "
                            "fit() ended as an EarlyStopping would")

    def on_train_end(self, logs=None):
        self._restore()
        if self._sink is not None:
            if self._steps == 0 and not self._sink.passive:
                self._sink.note("tapeviz.keras.Watch: no train step handed an optimizer its "
                                "gradients, so no step was summarized")
            self.recording = self._sink.close()

    def _restore(self) -> None:
        for owner, name, own, original in reversed(self._undo):
            if own:
                object.__setattr__(owner, name, original)
            else:
                object.__delattr__(owner, name)
        if self._undo:
            self.model.train_function = None    # the next fit() traces the plain step again
        self._undo = []


class _Site:
    """One place a train step hands an optimizer its gradients: the variables it updates, and
    the callback's variables the traced step writes for it, read after each step."""

    def __init__(self, where: tuple, variables: list, to: "sink.Sink", bins: bool):
        self.where, self.bins = where, bins
        self.index = {id(v): i for i, v in enumerate(variables)}
        # Keras's path ("sequential/conv2d/kernel"), as the recorder's own summaries name it
        paths = [str(getattr(v, "path", None) or v.name.split(":")[0]) for v in variables]
        self.sources = list(zip([to.key(v) for v in variables], paths))
        self.tape = to.new_tape()
        n = len(variables)
        # [the optimizer's step, the step binned last, each norm]: one read a step
        self.norms = tf.Variable(tf.fill([n + 2], tf.constant(NO_GRADIENT, tf.float64)),
                                 trainable=False)
        self.hist = tf.Variable(tf.zeros([n, metrics.HIST_BINS], tf.int64), trainable=False)
        self.last = None

    def keep(self, grads: list, variables: list, iterations) -> None:
        """Traced into the step (or run, when eager): norms, and on some steps the bins."""
        norms = [tf.constant(NO_GRADIENT, tf.float64)] * len(self.sources)
        values = [None] * len(self.sources)
        for g, v in zip(grads, variables):
            i = self.index.get(id(v))
            if i is None or g is None:
                continue
            values[i] = tf.reshape(g.values if isinstance(g, tf.IndexedSlices) else g, [-1])
            norms[i] = tf.cast(tf.norm(tf.cast(values[i], tf.float32)), tf.float64)
        step = tf.cast(iterations, tf.int64)
        binning = tf.constant(self.bins) & tf.equal(step % STEP_HIST_EVERY, 0)
        binned_at = tf.where(binning, tf.cast(step, tf.float64), self.norms[1])
        self.norms.assign(tf.stack([tf.cast(step, tf.float64), binned_at] + norms))
        if not self.bins:
            return

        def binned():
            rows = [_bins(x) if x is not None else tf.zeros([metrics.HIST_BINS], tf.int64)
                    for x in values]
            self.hist.assign(tf.stack(rows))
            return tf.constant(True)

        tf.cond(binning, binned, lambda: tf.constant(False))

    def read(self) -> Optional[tuple]:
        """(norms, histograms) of the step that ran since the last read, or None."""
        packed = self.norms.numpy()
        applied, binned_at = packed[0], packed[1]
        if applied < 0 or applied == self.last:
            return None
        self.last = applied
        norms = [None if n == NO_GRADIENT else float(n) for n in packed[2:]]
        hist = []
        if binned_at == applied:
            hist = [h.tolist() if norms[i] is not None else None
                    for i, h in enumerate(self.hist.numpy())]
        return norms, hist


def _optimizers(model) -> list:
    """The optimizers a model's train step may apply: its own, and any it holds by name (a
    GAN's `d_optimizer` and `g_optimizer`), each once."""
    found = [model.optimizer] if getattr(model, "optimizer", None) is not None else []
    for value in vars(model).values():
        if isinstance(value, tf.keras.optimizers.Optimizer) and \
                all(value is not f for f in found):
            found.append(value)
    return found


def _bins(values):
    """metrics.histogram in the graph: |value| counted in the fixed bins, NaN and Inf left out."""
    a = tf.abs(tf.cast(values, tf.float64))
    index = tf.searchsorted(_EDGES, a, side="right")
    index = tf.where(tf.math.is_finite(a), index, metrics.HIST_BINS)
    counts = tf.math.bincount(index, minlength=metrics.HIST_BINS + 1,
                              maxlength=metrics.HIST_BINS + 1, dtype=tf.int64)
    return counts[:metrics.HIST_BINS]


def _logged_loss(logs) -> Optional[float]:
    value = (logs or {}).get("loss")
    try:
        return float(value) if value is not None else None
    except (TypeError, ValueError):
        return None


def _caller(frame=None):
    """The nearest frame outside the libraries (from the caller's caller by default): the
    user's line that called fit(), or that handed an optimizer its gradients."""
    frame, libraries = frame or sys._getframe(2), library_dirs()
    while frame is not None and frame.f_code.co_filename.startswith(libraries + ("<",)):
        frame = frame.f_back
    return frame
