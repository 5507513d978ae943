"""tapeviz: the Streamlit entry point. The frame (config, menu) around the pages in pages/."""
from tapeviz.ui import frame

frame.run(__file__)
