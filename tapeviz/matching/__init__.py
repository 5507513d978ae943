"""Two recordings side by side: matched op by op, their values and gradients told apart
(match.py), the notebook's questions on one recording (questions.py), Model Explorer's graph
(model_explorer.py) and the command line's `diff` and `export` (cli.py). Plain data in and
out: no Streamlit, no TensorFlow."""
