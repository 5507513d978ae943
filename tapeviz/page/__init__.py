"""What the Streamlit pages keep between reruns: the shared Runner and drawn-graph memo
(session), the debugger's view choices (view), a training run's state (train_state) and
share links (share). No TensorFlow.
"""
