"""Keras users' way in: `model.fit(x, y, callbacks=[tapeviz.keras.Watch("run.json")])`.

`Watch` summarizes every train step of fit() (loss, each variable's gradient norm, their
histograms every tenth step) at fit()'s compiled speed: tapeviz/worker/keras_watch.py.
Importing this module imports no TensorFlow; naming `Watch` does.
"""
__all__ = ["Watch"]


def __getattr__(name):
    if name == "Watch":
        from .worker.keras_watch import Watch     # imports TensorFlow: only now
        return Watch
    raise AttributeError(f"module 'tapeviz.keras' has no attribute {name!r}")
