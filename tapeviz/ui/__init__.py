"""The Streamlit side of the pages: widgets, panels, the editor, and the objects one server
process shares between sessions (session.py). The only package that imports Streamlit."""
