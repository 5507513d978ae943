"""Every sentence a reader meets, built from plain data: over a view (sentences, tapes, picture,
eager_mode), about problems and the recording (problems, notes, reasons), and its parts (spelling,
values, markdown). No Streamlit, no TensorFlow; the caller says what a view draws."""
