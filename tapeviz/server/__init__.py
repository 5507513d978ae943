"""The server side: hands programs and training jobs to worker processes, behind limits,
a sandbox and fair queues. No TensorFlow and no Streamlit: the app and the command line
both use it.
"""
