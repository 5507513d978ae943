"""window_room: a graph taller than the window's room below it is drawn to end at the
window's bottom; the browser side is tests/test_layout_browser.py's."""
from tapeviz.page import window_room


def test_a_graph_ends_at_the_windows_bottom_only_when_that_leaves_it_legible():
    drawn = 580
    assert window_room.fit(drawn, None) == drawn            # not measured yet: as drawn
    assert window_room.fit(drawn, drawn + 200) == drawn     # a tall window keeps the whole height
    room = window_room.FIT_MIN_PX + 150
    assert window_room.fit(drawn, room) == room - window_room.MARGIN_PX
    assert window_room.fit(drawn, float(room)) == room - window_room.MARGIN_PX
    # too little room (callouts above it): squeezed it would be cramped and still cut
    assert window_room.fit(drawn, window_room.FIT_MIN_PX) == drawn
