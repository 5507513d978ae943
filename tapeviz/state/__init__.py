"""What a page keeps between reruns, as plain objects over `st.session_state` (a dict in the
tests): the debugger's and a training run's state, one run's phases, shared link runs, the
drawn-graph memo, share links. No Streamlit, no TensorFlow."""
