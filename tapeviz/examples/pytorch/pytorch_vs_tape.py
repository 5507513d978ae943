"""The PyTorch twin of pytorch_vs_tape.py: the page records it beside the tape's version."""
import torch

x = torch.tensor(10.0, requires_grad=True)
w = torch.tensor(2.0, requires_grad=True)
b = torch.tensor(3.0, requires_grad=True)

y = w * x + b

# TensorFlow: tape.gradient(y, [x, w, b])
y.backward()
print("x.grad =", x.grad)
print("w.grad =", w.grad)
print("b.grad =", b.grad)
