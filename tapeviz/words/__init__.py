"""Every sentence a reader meets, built from plain data: why a gradient is None and error
hints (reasons), ops in the Python that made them (spelling), numbers as Python prints them
(values), the notes about a recording (notes), and markdown that shows text as typed
(markdown). No Streamlit, no TensorFlow."""
