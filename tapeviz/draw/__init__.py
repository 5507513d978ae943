"""Recording and metrics -> pictures: the op graph (graph), where its nodes go (layout),
and the plotly figures of the debugger and training pages. Pure functions of plain data:
no TensorFlow, no Streamlit.
"""
