"""Printed output rendered as the terminal shows it at the end. No TF."""
from tapeviz.printed import as_shown


def test_a_keras_progress_bar_ends_as_its_last_drawing():
    # what Keras's Progbar writes for 3 steps, with backspaces and a carriage return
    bar = ("\x1b[1m1/3\x1b[0m \x1b[32m━━━━━━\x1b[0m\x1b[37m━━━━━━━━━━━━\x1b[0m - loss: 2.3000"
           + "\b" * 40 + "\r"
           + "\x1b[1m3/3\x1b[0m \x1b[32m━━━━━━━━━━━━━━━━━━\x1b[0m - loss: 1.2500\n"
           + "done\n")
    assert as_shown(bar) == "3/3 ━━━━━━━━━━━━━━━━━━ - loss: 1.2500\ndone\n"


def test_carriage_return_overwrites_only_what_it_writes_over():
    assert as_shown("epoch 10/10\rok") == "ok" + "och 10/10"
    assert as_shown("50%\r100%\n") == "100%\n"


def test_backspace_moves_left_and_erase_line_clears():
    assert as_shown("abc\b\bX") == "aXc"
    assert as_shown("\b\bstart") == "start"
    assert as_shown("long line\r\x1b[Kshort") == "short"
    assert as_shown("long line\x1b[2Kx") == " " * 9 + "x", "the cursor stays where it was"


def test_plain_text_and_other_escapes():
    assert as_shown("a\nb\n\nc") == "a\nb\n\nc"
    assert as_shown("\x1b]0;title\x07text\x1b[?25l") == "text"
