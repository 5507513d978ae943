"""tapeviz: the Streamlit entry point. Navigation only; the pages hold the logic."""
import streamlit as st

st.set_page_config(page_title="tapeviz", page_icon="🎞️", layout="wide")
st.title("tapeviz")
st.write("A visual debugger for TensorFlow's eager execution and GradientTape. The pages are on their way.")
