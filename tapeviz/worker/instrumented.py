"""Worker side: the instrumented GradientTape, and the adoption of tapes of TensorFlow's class.

The tape is a real tf.GradientTape subclass made per run, so TensorFlow computes every
result; it only tells the run's capture.Session what happens. User code gets it through
its own `__import__` (user_import.py).
"""
from __future__ import annotations

import contextlib
import operator
import sys

import tensorflow as tf
from tensorflow.python.eager import backprop, context, record as tape_record
from tensorflow.python.util import nest

from ..words import hints
from . import shared_gradients
from .frames import library_train_step
from .capture import Session, handle_or_self
from ..recording import GradientCall


def make_tape_class(session: Session):
    """A tf.GradientTape subclass bound to one run's session.

    It is a real GradientTape (isinstance holds, results are TensorFlow's own); it only
    tells the session what happens. Made per run so that no global state is patched."""

    class GradientTape(_RecordedTape):
        __doc__ = tf.GradientTape.__doc__
        _tapeviz_session = session

    GradientTape.__module__ = "tensorflow"
    GradientTape.__qualname__ = "GradientTape"
    return GradientTape


class _RecordedTape(backprop.GradientTape):
    """The instrumented tape's methods. Its run's Session is the class attribute
    `_tapeviz_session` of the subclass make_tape_class makes: the instance holds nothing of
    tapeviz's beyond TensorFlow's own, so adopt_tapes can switch a plain tape's class."""

    _tapeviz_session: Session
    _tapeviz_inner = 0

    def _tracked(self) -> bool:
        return context.executing_eagerly() and not self._tapeviz_inner

    def __enter__(self):
        result = super().__enter__()
        session = self._tapeviz_session
        window = session.window           # only some top-level tapes record
        if self._tracked():
            frame = session.user_frame(sys._getframe(1))
            if window is None or window.enter(self, (session.here, frame and frame.f_lineno)):
                state = _quietly(session, "could not follow this tape", session.open_tape,
                                 self, frame)
                if window is not None and state is not None and state.rec.parent is None:
                    state.rec.index = window.current
        elif not context.executing_eagerly():
            # the `with`'s frame: an adopted tape came here through adopt_tapes' __enter__
            _quietly(session, "could not note this tape", session.traced_tape, self,
                     sys._getframe(2 if "_tapeviz_adopted" in self.__dict__ else 1))
        return result

    def __exit__(self, typ, value, tb):
        result = super().__exit__(typ, value, tb)
        session = self._tapeviz_session
        if session.window is not None:
            session.window.exit(self)
        if "_tapeviz_traced_rec" in self.__dict__:
            _quietly(session, "could not note this tape", session.traced_tape_exit, self)
        if self._tracked() and session.state_of(self) is not None:
            frame = session.user_frame(sys._getframe(1))
            session.scan_names(frame)
            _quietly(session, "could not follow this tape", session.close_tape, self, frame)
        return result

    def watch(self, tensor):
        super().watch(tensor)
        if self._tracked():
            session = self._tapeviz_session
            _quietly(session, "could not follow tape.watch", session.watch, self, tensor,
                     session.user_frame(sys._getframe(1)))

    @contextlib.contextmanager
    def stop_recording(self):
        session = self._tapeviz_session
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
        if self._tracked():
            session = self._tapeviz_session
            _quietly(session, "could not follow tape.reset", session.reset_tape, self,
                     session.user_frame(sys._getframe(1)))

    def gradient(self, target, sources, output_gradients=None,
                 unconnected_gradients=tf.UnconnectedGradients.NONE):
        session = self._tapeviz_session
        state = session.state_of(self)
        if self._tracked() and state is not None:
            call = _quietly(session, "could not follow this gradient call", self._begin_call,
                            "gradient", target, sources, session.user_frame(sys._getframe(1)))
            if call is not None:
                return self._recorded_gradient(state, call, target, sources, output_gradients,
                                               unconnected_gradients)
        elif "_tapeviz_traced" in self.__dict__ and not self._tapeviz_inner \
                and not context.executing_eagerly():
            return session.traced_gradient(self, target, sources, lambda: super(
                _RecordedTape, self).gradient(target, sources, output_gradients,
                                              unconnected_gradients), sys._getframe(1))
        elif self._tracked() and "_tapeviz_unrecorded" in self.__dict__:
            return self._unrecorded_call("gradient", target, sources, lambda: super(
                _RecordedTape, self).gradient(target, sources, output_gradients,
                                              unconnected_gradients))
        return super().gradient(target, sources, output_gradients, unconnected_gradients)

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

    # -- a recorded gradient call ---------------------------------------------------------
    def _recorded_gradient(self, state, call, target, sources, output_gradients,
                           unconnected_gradients):
        """`gradient` of a recorded tape, whose call `_begin_call` has noted."""
        session = self._tapeviz_session
        flat_sources = nest.flatten(sources)
        # Ask TensorFlow for d target / d t of the tensors between sources and target in the
        # same call: the backward pass computes them anyway, so the user's results and the
        # ops it runs are unchanged, and nothing extra is recorded on any tape.
        flow_ids = self._flow_ids(state, target, flat_sources)
        flow_tensors = [state.held[i] for i in flow_ids]
        asked = flat_sources + flow_tensors
        first = session.next_op
        session.grad_depth += 1
        session.grad_call = len(state.rec.gradients) - 1
        try:
            # One flat list: TF flattens sources and packs its results back into their
            # structure, and a nested one costs nest's protocol checks per list per call
            flat_grads = super().gradient(target, asked, output_gradients,
                                          unconnected_gradients)
        except Exception as e:
            call.error = f"{type(e).__name__}: {e}"
            raise
        finally:
            session.grad_depth -= 1
            if not self._persistent:
                state.release()
        n = len(flat_sources)
        source_grads, flow_grads = flat_grads[:n], flat_grads[n:]
        grads = _pack(sources, flat_sources, source_grads)
        session.quiet += 1
        try:
            if flow_tensors:          # what TF leaked for the flow's extra sources
                _quietly(session, "could not free the gradient flow's tensors",
                         shared_gradients.release, asked, flat_grads, n)
            self._describe_call("gradient", state, call, target, flat_sources, source_grads,
                                flow_ids, flow_grads, first)
        finally:
            session.quiet -= 1
        return grads

    def _jacobian_call(self, kind, target, sources, kwargs):
        method = getattr(super(), kind)
        session = self._tapeviz_session
        state = session.state_of(self)
        if not self._tracked() or state is None:
            if self._tracked() and "_tapeviz_unrecorded" in self.__dict__:
                return self._unrecorded_call(kind, target, sources,
                                             lambda: method(target, sources, **kwargs), 3)
            return method(target, sources, **kwargs)
        frame = session.user_frame(sys._getframe(2))
        call = _quietly(session, f"could not follow this {kind} call", self._begin_call,
                        kind, target, sources, frame)
        if call is None:
            return method(target, sources, **kwargs)
        flat_sources = nest.flatten(sources)
        flow_ids = self._flow_ids(state, target, flat_sources)
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
        flow_ids, flow_grads = self._jacobian_flow(state, call, target, flow_ids)
        flat_results = nest.flatten(result)
        session.quiet += 1
        try:
            self._describe_call(kind, state, call, target, flat_sources, flat_results,
                                flow_ids, flow_grads, first)
        finally:
            session.quiet -= 1
        return result

    def _jacobian_flow(self, state, call, target, flow_ids: list) -> tuple:
        """(flow ids, their gradients) for a jacobian call: d sum(target) / d t, asked
        separately. With every tape stopped and the callback quiet, nothing of it lands in
        the recording. A non-persistent tape has none: its one question is spent."""
        if not flow_ids:
            return flow_ids, []
        if not self._persistent:
            call.note = ("gradient flow of a jacobian needs a persistent tape "
                         "(tf.GradientTape(persistent=True)): a non-persistent tape can "
                         "answer only one question")
            return [], []
        session = self._tapeviz_session
        session.quiet += 1
        try:
            flow_sources = [state.held[i] for i in flow_ids]
            with tape_record.stop_recording():
                flow_grads = super().gradient(target, flow_sources)
            _quietly(session, "could not free the gradient flow's tensors",
                     shared_gradients.release, flow_sources, flow_grads, 0)
        finally:
            session.quiet -= 1
        return flow_ids, flow_grads

    def _flow_ids(self, state, target, flat_sources: list) -> list:
        """The recording ids of the tensors between `flat_sources` and `target` on this tape
        (none once TensorFlow has let go of the tape)."""
        if self._tape is None:
            return []
        session = self._tapeviz_session
        return _quietly(session, "could not find the gradient flow", session.between, state,
                        self._flat_ids(target), self._flat_ids(flat_sources)) or []

    def _describe_call(self, kind, state, call, target, flat_sources, results, flow_ids,
                       flow_grads, first) -> None:
        """The call's results and flow into the recording, and its summary into the steps
        (the caller keeps the session quiet)."""
        session = self._tapeviz_session
        _quietly(session, f"could not describe this {kind} call", session.finish_call,
                 state, call, flat_sources, results, flow_ids, flow_grads, first)
        _quietly(session, f"could not summarize this {kind} call", session.steps.add,
                 session, state, call, target, flat_sources, results)

    def _unrecorded_call(self, kind, target, sources, compute, depth=2):
        """A gradient call of a tape the window left unrecorded (a loop's later step):
        TensorFlow's call as plainly, then its summary alone, from the target's value and
        each result's norm (NumPy, no op), so the run view still charts this step."""
        session = self._tapeviz_session
        frame = session.user_frame(sys._getframe(depth))
        where = (session.here, frame.f_lineno if frame else None)
        tape_id, index = self.__dict__["_tapeviz_unrecorded"]
        self.__dict__["_tapeviz_unrecorded"][1] += 1
        try:
            results = compute()
        except Exception as e:
            _quietly(session, f"could not summarize this {kind} call", session.steps.add_plain,
                     session, tape_id, index, kind, where, target, sources, None,
                     f"{type(e).__name__}: {e}")
            raise
        session.quiet += 1
        try:
            _quietly(session, f"could not summarize this {kind} call", session.steps.add_plain,
                     session, tape_id, index, kind, where, target, sources, results, None)
        finally:
            session.quiet -= 1
        return results

    def _begin_call(self, kind, target, sources, frame) -> GradientCall:
        session = self._tapeviz_session
        state = session.state_of(self)
        line = frame.f_lineno if frame else None

        def ids(structure) -> list:   # of its tensors and variables; the rest is skipped
            return [session.tensor_id(obj, line)
                    for obj in map(handle_or_self, nest.flatten(structure)) if obj is not None]

        call = GradientCall(line, kind, ids(target), ids(sources), file=session.here)
        if self._recording and self._persistent:
            call.warning = hints.PERSISTENT_INSIDE_HINT
            session.warnings.append({"line": line, "message": hints.PERSISTENT_INSIDE_HINT})
        state.rec.gradients.append(call)
        session.scan_names(frame)      # names for targets and sources first seen here
        return call

    @staticmethod
    def _flat_ids(structure) -> set:
        ids = set()
        for t in nest.flatten(structure):
            obj = handle_or_self(t)
            if obj is not None:
                ids.add(obj._id)
        return ids


def _quietly(session, what, fn, *args):
    """Run one piece of tapeviz's bookkeeping; its failure becomes a warning, never the
    program's exception."""
    try:
        return fn(*args)
    except Exception as e:
        session.fault(what, e)
        return None


@contextlib.contextmanager
def adopt_tapes(session: Session, tape_class, adopts=None):
    """While the program runs, a plain tf.GradientTape that the program itself enters,
    whatever alias made it (tf.compat.v1.GradientTape, tensorflow.python.eager.backprop,
    a name kept from before the run), becomes the run's instrumented tape class.

    The instrumented class is a subclass without state of its own, so switching the
    instance's class changes nothing TensorFlow computes. Tapes that libraries enter for
    their own ends are left alone: only those entered from the user's own files and the one
    tape of a library's default training step (`model.fit()` without a train_step of the
    user's), which holds the user's model and loss: `adopts(code object of the caller)`
    says which, by default `user_tape_site` for the run's project.

    `with` looks up `__exit__` on the type before `__enter__` runs, so the adopted tape's
    block ends in the plain class's `__exit__`: that one, patched too, hands a tape adopted
    at its `__enter__` to the instrumented `__exit__` (else the tape stays open in the run,
    holding what it recorded, and every later tape nests in it)."""
    real = backprop.GradientTape          # TensorFlow's class (tf.GradientTape may be patched)
    original_enter = real.__dict__["__enter__"]
    original_exit = real.__dict__["__exit__"]
    if adopts is None:
        def adopts(code):
            return user_tape_site(session, code)

    def __enter__(self):
        if type(self) is real and adopts(sys._getframe(1).f_code):
            try:
                self.__class__ = tape_class
            except TypeError as e:
                session.fault("could not instrument this GradientTape; it runs unrecorded", e,
                              sys._getframe(1).f_lineno)
            else:
                self.__dict__["_tapeviz_adopted"] = True
                return self.__enter__()
        return original_enter(self)

    def __exit__(self, typ, value, tb):
        # Popped first: the instrumented __exit__ reaches this one again through super()
        if self.__dict__.pop("_tapeviz_adopted", False) and isinstance(self, tape_class):
            return tape_class.__exit__(self, typ, value, tb)
        return original_exit(self, typ, value, tb)

    real.__enter__ = __enter__
    real.__exit__ = __exit__
    try:
        yield
    finally:
        real.__enter__ = original_enter
        real.__exit__ = original_exit


def user_tape_site(session: Session, code) -> bool:
    """Does a tape entered by `code` belong to the user: `code` is in the project's files, or
    is a library's default train_step (matched by file and function, so no library is
    imported to ask)?"""
    return session.files.name(code.co_filename) is not None or library_train_step(code)


def _pack(sources, flat_sources: list, flat_grads: list):
    """`flat_grads` in the structure of `sources`, as TensorFlow's gradient returns them. A
    plain list or tuple of tensors and variables (what nearly every call passes) is its own
    flat form, so it is rebuilt directly: nest's packing costs about 10 us per call."""
    if sources.__class__ in (list, tuple) and len(sources) == len(flat_sources) and all(
            map(operator.is_, sources, flat_sources)):
        return sources.__class__(flat_grads)
    return nest.pack_sequence_as(sources, flat_grads)
