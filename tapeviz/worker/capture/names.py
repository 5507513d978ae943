"""Names: the user's Python variables bound to tensors and variables, read from the
program's frames and namespaces, and TensorFlow's or Keras's own name for each variable.
"""
from __future__ import annotations

import dis
import inspect
import re
import sys
import weakref
from typing import Optional

import tensorflow as tf
from tensorflow.python.framework.ops import EagerTensor   # no eager context at import

from ...recording import VARIABLE

_CO_OPTIMIZED = inspect.CO_OPTIMIZED   # a function's frame: f_locals is a snapshot
TENSOR = "tensor"                 # what _name_one names: Session.nameable's values

_DEFAULT_VARIABLE = re.compile(r"Variable(_\d+)?")   # tf.Variable's name when given none

_KERAS_VARIABLE_INIT = ("keras/src/backend/tensorflow/core.py", "_initialize")


def _keras_variable_path(frame, depth: int = 12):
    """The path of the Keras variable whose tf.Variable is being made ("actor_critic/actor/
    kernel"), read from Keras's own frame that makes it: TensorFlow's name for it keeps only
    the model's scope when a subclassed model builds its layers ("actor_critic/kernel")."""
    for _ in range(depth):
        if frame is None:
            return None
        code = frame.f_code
        if code.co_name == _KERAS_VARIABLE_INIT[1] and \
                code.co_filename.replace("\\", "/").endswith(_KERAS_VARIABLE_INIT[0]):
            path = getattr(frame.f_locals.get("self"), "path", None)
            return path if isinstance(path, str) else None
        frame = frame.f_back
    return None


_STORES = {"STORE_NAME", "STORE_FAST", "STORE_GLOBAL", "STORE_DEREF"}


def loop_targets(code) -> frozenset:
    """The names a `for` statement of `code` binds in turn (`for w in weights`, `for x, y in
    batches`), read from its bytecode: each FOR_ITER's next item is stored, unpacked or not.
    These name each thing they held only until a better name is found (see _better)."""
    names = set()
    pending = 0
    for ins in dis.get_instructions(code):
        if ins.opname == "FOR_ITER":
            pending = 1
        elif not pending:
            continue
        elif ins.opname == "UNPACK_SEQUENCE":
            pending += ins.arg - 1
        elif ins.opname == "UNPACK_EX":              # a, *rest: before, the star, after
            pending += (ins.arg & 0xFF) + (ins.arg >> 8)
        elif ins.opname in _STORES:
            names.add(ins.argval)
            pending -= 1
        else:                                        # `for self.x in`: not a plain name
            pending = 0
    return frozenset(names)


def _forget(table: dict, key: int):
    """A weakref callback that drops `key` from `table` when its class dies (unless the id
    was reused by a class seen since)."""
    def forget(ref):
        known = table.get(key)
        if known is not None and known[0] is ref:
            del table[key]
    return forget


def _forget_snapshot(frame, namespace: dict) -> None:
    """Empty the locals snapshot that reading `frame.f_locals` left on a function's frame.

    Python (before 3.13) keeps that dict on the frame until the next read refreshes it, so
    a tensor the program then deletes (`del x`) would stay alive in it: weakrefs stay set,
    TensorFlow's `assert_no_new_tensors` fails. Only a snapshot no one else holds is emptied
    (the frame's reference, the caller's, ours, getrefcount's argument): one from
    `locals()`, or a debugger's, stays as it would plainly. Each read refills it anew."""
    if frame.f_code.co_flags & _CO_OPTIMIZED and sys.getrefcount(namespace) <= 4:
        namespace.clear()


class Names:
    """Session's part that owns `handle_names`, `variable_names`, `trainable`, `bindings`,
    `rebound` and `nameable`: what the user (or TensorFlow) called each tensor and variable."""

    def scan_names(self, frame) -> None:
        if frame is None:
            return
        code = frame.f_code
        self.note_loops(code)
        if code.co_name == "<module>":
            self.scan_namespace(frame.f_globals)
            return
        namespace = frame.f_locals
        try:
            self.scan_namespace(namespace)
        finally:
            _forget_snapshot(frame, namespace)

    def note_loops(self, code) -> None:
        """Count the loop targets of `code` as rebound (see loop_targets), once a code."""
        if id(code) not in self.loop_codes:          # held: an id is not reused while it is
            self.loop_codes[id(code)] = code
            self.rebound.update(loop_targets(code))

    def scan_namespace(self, namespace: dict) -> None:
        """Name the tensors and variables bound in `namespace` (first binding wins, see
        _better)."""
        try:
            self._scan_namespace(namespace)
        except Exception as e:        # a name is only a label: never fail the program for it
            self.fault("could not read the program's variable names", e)

    def _scan_namespace(self, namespace: dict) -> None:
        for name, value in list(namespace.items()):
            if name.startswith("__"):
                continue
            if isinstance(value, (list, tuple)) and 0 < len(value) <= 64:
                for i, v in enumerate(value):
                    self._name_one(f"{name}[{i}]", v)
            else:
                self._name_one(name, value)

    def _name_one(self, name, value):
        cls = value.__class__
        known = self.nameable.get(id(cls))
        if known is not None and known[0]() is cls:
            kind = known[1]
        else:
            # isinstance(value, tf.Variable) goes through ABC machinery, and a namespace is
            # scanned at each new statement of the program: decided once a class, which is
            # held weakly (a class made per call dies as it does plainly, with its functions)
            kind = (TENSOR if issubclass(cls, tf.Tensor) else     # eager, or a traced graph's
                    VARIABLE if issubclass(cls, tf.Variable) or cls.__name__ == "Variable"
                    else "")
            self.nameable[id(cls)] = (weakref.ref(cls, _forget(self.nameable, id(cls))), kind)
        if kind is TENSOR:
            rec = self.record(self.tid.get(value._id))
            if rec is not None and (rec.name is None or self._better(name, rec.name)):
                rec.name = name
        elif kind is VARIABLE:
            try:
                handle = value.handle
            except Exception:
                return
            if isinstance(handle, EagerTensor):
                self._note_binding(name, handle._id)
                if self._better(name, self.handle_names.get(handle._id)):
                    self.handle_names[handle._id] = name
                rec = self.tensors.get(self.tid.get(handle._id))
                if rec is not None:
                    rec.name = self.handle_names[handle._id]

    def _note_binding(self, name: str, tf_id: int) -> None:
        """Remember which variable `name` holds; a name seen holding another before (`v =
        layer.kernel` in a loop, a parameter of a function called on several) is `rebound`.
        Not for tensors: `state = step(state)` names each state it holds rightly."""
        before = self.bindings.get(name)
        if before != tf_id:
            if before is not None:
                self.rebound.add(name)
            self.bindings[name] = tf_id

    def _rebound(self, name: str) -> bool:
        """Was `name` (or the list it indexes: "batch[0]") a loop's target, or seen holding
        two different things?"""
        rebound = self.rebound
        return name in rebound or (name[-1] == "]" and name.partition("[")[0] in rebound)

    def _better(self, name: str, current: Optional[str]) -> bool:
        """Does `name` replace `current`? The first binding wins, unless it was a name the
        program rebinds and `name` is not: `for w in weights` must not name every weight `w`,
        while `for x, y in batches` keeps naming each batch when nothing else does."""
        return current is None or (self._rebound(current) and not self._rebound(name))

    def variable_name(self, tf_id: int, name: Optional[str]) -> Optional[str]:
        """A variable's name in the recording: the program's name for it, unless that name
        was rebound (a loop variable) and TensorFlow or Keras gave it a name of its own
        ("dense/kernel"; TF's default "Variable" is no one's name)."""
        if name is not None and not self._rebound(name):
            return name
        own = self.variable_names.get(tf_id)
        return own if own is not None and not _DEFAULT_VARIABLE.fullmatch(own) else name

    def on_variable(self, next_creator, **kwargs):
        """variable_creator_scope hook: remember TF's name for each variable made."""
        variable = next_creator(**kwargs)
        handle = getattr(variable, "handle", None)
        if isinstance(handle, EagerTensor):
            path = _keras_variable_path(sys._getframe(1)) or variable.name.split(":")[0]
            parts = path.split("/")
            # "sequential/conv2d/kernel" -> "conv2d/kernel": the layer is what students see
            self.variable_names[handle._id] = "/".join(parts[-2:])
            self.trainable[handle._id] = bool(getattr(variable, "trainable", True))
        return variable
