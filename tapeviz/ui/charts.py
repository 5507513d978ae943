"""How both pages show plotly charts beside the debugger's graph: legible on a projector."""
from __future__ import annotations


def legible(fig):
    """A chart read from the back of a room: plotly's 12 px pale-grey ticks and legends grow
    to 15 px in near-black (titles keep their own, larger size)."""
    fig.update_layout(font=dict(size=15, color="#222"), legend_font_size=15)
    for axes in (fig.update_xaxes, fig.update_yaxes):
        axes(tickfont=dict(size=15, color="#222"), title_font=dict(size=16, color="#222"))
    return fig
