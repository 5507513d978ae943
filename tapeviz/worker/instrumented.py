"""Worker side: the instrumented GradientTape and the `tensorflow` that user code imports.

The tape is a real tf.GradientTape subclass made per run, so TensorFlow computes every
result; it only tells the run's capture.Session what happens. User code gets it
through its own `__import__`: sys.modules and every library keep the real module.
"""
from __future__ import annotations

import builtins
import contextlib
import sys
import types

import tensorflow as tf
from tensorflow.python.eager import context, record as tape_record
from tensorflow.python.util import nest

from .. import explain
from .capture import EagerTensor, Session
from ..recording import GradientCall


def make_tape_class(session: Session):
    """A tf.GradientTape subclass bound to one run's session.

    It is a real GradientTape (isinstance holds, results are TensorFlow's own); it only
    tells the session what happens. Made per run so that no global state is patched."""

    class GradientTape(tf.GradientTape):
        __doc__ = tf.GradientTape.__doc__
        _tapeviz_inner = 0

        def _tracked(self) -> bool:
            return context.executing_eagerly() and not self._tapeviz_inner

        def __enter__(self):
            result = super().__enter__()
            window = session.window           # --tapes: only some top-level tapes record
            if self._tracked() and (window is None or window.enter(self)):
                state = session.open_tape(self, session.user_frame(sys._getframe(1)))
                if window is not None and state.rec.parent is None:
                    state.rec.index = window.current
            return result

        def __exit__(self, typ, value, tb):
            result = super().__exit__(typ, value, tb)
            if session.window is not None:
                session.window.exit(self)
            if self._tracked() and session.state_of(self) is not None:
                frame = session.user_frame(sys._getframe(1))
                session.scan_names(frame)
                session.close_tape(self, frame)
            return result

        def watch(self, tensor):
            super().watch(tensor)
            if self._tracked():
                session.watch(self, tensor, session.user_frame(sys._getframe(1)))

        @contextlib.contextmanager
        def stop_recording(self):
            state = session.state_of(self)
            with super().stop_recording():
                if state is not None:
                    session.pause_span(state)
                try:
                    yield
                finally:
                    if state is not None:
                        session.resume_span(state)

        def reset(self):
            super().reset()
            state = session.state_of(self)
            if state is not None:
                state.ids.clear()
                state.held.clear()
                state.edges.clear()

        def gradient(self, target, sources, output_gradients=None,
                     unconnected_gradients=tf.UnconnectedGradients.NONE):
            state = session.state_of(self)
            if not self._tracked() or state is None:
                return super().gradient(target, sources, output_gradients,
                                        unconnected_gradients)
            frame = session.user_frame(sys._getframe(1))
            call = self._begin_call("gradient", target, sources, frame)
            flat_sources = nest.flatten(sources)
            # Ask TensorFlow for d target / d t of the tensors between sources and target in the
            # same call: the backward pass computes them anyway, so the user's results and the
            # ops it runs are unchanged, and nothing extra is recorded on any tape.
            flow_ids = []
            if self._tape is not None:
                flow_ids = session.between(state, self._flat_ids(target),
                                           self._flat_ids(flat_sources))
            flow_tensors = [state.held[i] for i in flow_ids]
            first = session.next_op
            session.grad_depth += 1
            session.grad_call = len(state.rec.gradients) - 1
            try:
                both = super().gradient(target, [sources, flow_tensors], output_gradients,
                                        unconnected_gradients)
            except Exception as e:
                call.error = f"{type(e).__name__}: {e}"
                raise
            finally:
                session.grad_depth -= 1
                if not self._persistent:
                    state.release()
            grads, flow_grads = both
            session.quiet += 1
            try:
                session.finish_call(state, call, flat_sources, nest.flatten(grads), flow_ids,
                                    flow_grads, first)
            finally:
                session.quiet -= 1
            return grads

        def jacobian(self, target, sources, unconnected_gradients=tf.UnconnectedGradients.NONE,
                     parallel_iterations=None, experimental_use_pfor=True):
            return self._jacobian_call("jacobian", target, sources, dict(
                unconnected_gradients=unconnected_gradients,
                parallel_iterations=parallel_iterations,
                experimental_use_pfor=experimental_use_pfor))

        def batch_jacobian(self, target, source,
                           unconnected_gradients=tf.UnconnectedGradients.NONE,
                           parallel_iterations=None, experimental_use_pfor=True):
            return self._jacobian_call("batch_jacobian", target, source, dict(
                unconnected_gradients=unconnected_gradients,
                parallel_iterations=parallel_iterations,
                experimental_use_pfor=experimental_use_pfor))

        # -- helpers ----------------------------------------------------------------------
        def _jacobian_call(self, kind, target, sources, kwargs):
            method = getattr(super(), kind)
            state = session.state_of(self)
            if not self._tracked() or state is None:
                return method(target, sources, **kwargs)
            frame = session.user_frame(sys._getframe(2))
            call = self._begin_call(kind, target, sources, frame)
            flow_ids = session.between(state, self._flat_ids(target),
                                       self._flat_ids(nest.flatten(sources))) \
                if self._tape is not None else []
            first = session.next_op
            session.grad_depth += 1
            session.grad_call = len(state.rec.gradients) - 1
            self._tapeviz_inner += 1     # jacobian calls self.gradient inside: pass it through
            try:
                result = method(target, sources, **kwargs)
            except Exception as e:
                call.error = f"{type(e).__name__}: {e}"
                raise
            finally:
                self._tapeviz_inner -= 1
                session.grad_depth -= 1
            flow_grads = []
            if self._persistent and flow_ids:
                # The flow of a jacobian is d sum(target) / d t, asked separately: with every
                # tape stopped and the callback quiet, nothing of it lands in the recording.
                session.quiet += 1
                try:
                    with tape_record.stop_recording():
                        flow_grads = super().gradient(target, [state.held[i] for i in flow_ids])
                finally:
                    session.quiet -= 1
            elif flow_ids:
                call.note = ("gradient flow of a jacobian needs a persistent tape "
                             "(tf.GradientTape(persistent=True)): a non-persistent tape can "
                             "answer only one question")
                flow_ids = []
            flat_sources = nest.flatten(sources)
            flat_results = nest.flatten(result)
            session.quiet += 1
            try:
                session.finish_call(state, call, flat_sources, flat_results, flow_ids,
                                    flow_grads, first)
            finally:
                session.quiet -= 1
            return result

        def _begin_call(self, kind, target, sources, frame) -> GradientCall:
            state = session.state_of(self)
            line = frame.f_lineno if frame else None
            call = GradientCall(line, kind,
                                [session.source_id(t, line) for t in nest.flatten(target)
                                 if _is_tensorlike(t)],
                                [session.source_id(s, line) for s in nest.flatten(sources)
                                 if _is_tensorlike(s)], file=session.here)
            if self._recording and self._persistent:
                call.warning = explain.PERSISTENT_INSIDE_HINT
                session.warnings.append({"line": line, "message": explain.PERSISTENT_INSIDE_HINT})
            state.rec.gradients.append(call)
            session.scan_names(frame)      # names for targets and sources first seen here
            return call

        @staticmethod
        def _flat_ids(structure) -> set:
            ids = set()
            for t in nest.flatten(structure):
                handle = getattr(t, "handle", None)
                obj = handle if isinstance(handle, EagerTensor) else t
                if isinstance(obj, EagerTensor):
                    ids.add(obj._id)
            return ids

    GradientTape.__module__ = "tensorflow"
    GradientTape.__qualname__ = "GradientTape"
    return GradientTape


def _is_tensorlike(x) -> bool:
    return isinstance(x, EagerTensor) or isinstance(getattr(x, "handle", None), EagerTensor)


# -- the view of `tensorflow` that user code imports ----------------------------------------------

class _Overlay(types.ModuleType):
    """A module that answers a few names itself and forwards the rest to the real module."""

    def __init__(self, real, overrides: dict):
        super().__init__(real.__name__, getattr(real, "__doc__", None))
        self.__dict__["_real"] = real
        self.__dict__.update(overrides)

    def __getattr__(self, name):
        return getattr(self.__dict__["_real"], name)

    def __dir__(self):
        return sorted(set(dir(self.__dict__["_real"])) | set(self.__dict__))


def make_import(tape_class):
    """An __import__ for the user's globals: `tensorflow` comes with the instrumented tape.

    Only the user's program sees it; sys.modules and every library keep the real module."""
    autodiff = _Overlay(tf.autodiff, {"GradientTape": tape_class})
    overlay = _Overlay(tf, {"GradientTape": tape_class, "autodiff": autodiff})
    real_import = builtins.__import__

    def tapeviz_import(name, globals=None, locals=None, fromlist=(), level=0):
        module = real_import(name, globals, locals, fromlist, level)
        if level == 0 and (name == "tensorflow" or name.startswith("tensorflow.")):
            if name == "tensorflow" or not fromlist:
                return overlay           # `import tensorflow.x as y` walks attributes from here
            if name == "tensorflow.autodiff":
                return autodiff
        return module

    return tapeviz_import
