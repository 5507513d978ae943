"""PyTorch's backward() beside TensorFlow's tape
The same y = w * x + b, differentiated the PyTorch way and the TensorFlow way. PyTorch
builds its graph as the ops run and `y.backward()` fills `x.grad`, `w.grad` and `b.grad`;
TensorFlow records the ops on a GradientTape and `tape.gradient` returns the gradients.
Both give dy/dx = w = 2, dy/dw = x = 10 and dy/db = 1. The page runs the PyTorch version
too and shows both graphs side by side, matched op by op (PyTorch is an optional extra:
`pip install .[torch]`).
"""
import tensorflow as tf

x = tf.Variable(10.0)
w = tf.Variable(2.0)
b = tf.Variable(3.0)

with tf.GradientTape() as tape:
    y = w * x + b

# PyTorch: y.backward(), then x.grad, w.grad, b.grad
dy_dx, dy_dw, dy_db = tape.gradient(y, [x, w, b])
print("dy/dx =", dy_dx.numpy())
print("dy/dw =", dy_dw.numpy())
print("dy/db =", dy_db.numpy())
