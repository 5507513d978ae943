"""viewport: a graph taller than the window's room below it is drawn to end at the
window's bottom; the browser side is tests/test_layout_browser.py's."""
from tapeviz.ui import viewport


def test_a_graph_ends_at_the_windows_bottom_only_when_that_leaves_it_legible():
    drawn = 580
    assert viewport.fit(drawn, None) == drawn            # not measured yet: as drawn
    assert viewport.fit(drawn, drawn + 200) == drawn     # a tall window keeps the whole height
    room = viewport.FIT_MIN_PX + 150
    assert viewport.fit(drawn, room) == room - viewport.MARGIN_PX
    assert viewport.fit(drawn, float(room)) == room - viewport.MARGIN_PX
    # too little room (callouts above it): squeezed it would be cramped and still cut
    assert viewport.fit(drawn, viewport.FIT_MIN_PX) == drawn
