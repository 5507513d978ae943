"""tapeviz: a visual debugger for TensorFlow 2 eager execution and GradientTape.

Importing this package never imports TensorFlow; only the worker-side modules
(recorder, training) do, and only inside a worker process.
"""
__version__ = "0.1.0"
