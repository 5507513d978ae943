"""Saving: tf.train.Checkpoint save/restore, tf.saved_model, and tf.summary writers."""
import os
import tempfile

import tensorflow as tf


class Scale(tf.Module):
    def __init__(self):
        super().__init__()
        self.w = tf.Variable(2.0, name="w")

    @tf.function(input_signature=[tf.TensorSpec([], tf.float32)])
    def __call__(self, x):
        return self.w * x


workdir = tempfile.mkdtemp()
model = Scale()
with tf.GradientTape() as tape:
    y = model(tf.constant(5.0))
print("grad dy_dw:", tape.gradient(y, model.w).numpy().tolist())

ckpt = tf.train.Checkpoint(model=model, step=tf.Variable(1))
path = ckpt.save(os.path.join(workdir, "ckpt"))
print("saved:", os.path.basename(path))
model.w.assign(7.0)
ckpt.restore(path).assert_consumed()
print("restored w:", model.w.numpy())
manager = tf.train.CheckpointManager(ckpt, os.path.join(workdir, "managed"), max_to_keep=2)
for _ in range(3):
    ckpt.step.assign_add(1)
    manager.save()
print("kept:", len(manager.checkpoints))

tf.saved_model.save(model, os.path.join(workdir, "saved"))
loaded = tf.saved_model.load(os.path.join(workdir, "saved"))
print("loaded(3):", loaded(tf.constant(3.0)).numpy())
x = tf.Variable(3.0)
with tf.GradientTape() as tape:
    out = loaded(x)
print("grad loaded:", tape.gradient(out, x).numpy().tolist())

writer = tf.summary.create_file_writer(os.path.join(workdir, "logs"))
with writer.as_default():
    for step in range(3):
        tf.summary.write("loss", 1.0 / (step + 1), step=step)
        tf.summary.write("note", tf.constant("step " + str(step)), step=step)
        tf.summary.write("w", tf.constant([1.0, 2.0, 3.0]) * float(step), step=step)
writer.flush()
print("event files:", len(os.listdir(os.path.join(workdir, "logs"))))
