"""The run view while the program runs: the step summaries its job streamed so far
(state/live_steps.py), charted as the finished run's view is (draw/run_figures.py), redrawn
in place while the page waits for the recording."""
from __future__ import annotations

import streamlit as st

from ..draw import run_figures
from . import charts


class LivePanel:
    """One placeholder under the run's status; `update(job)` redraws it when new summaries
    came (a redraw per poll would send a figure a second for nothing)."""

    def __init__(self, where):
        self.slot = where.empty()
        self.shown = -1

    def update(self, job) -> None:
        live = job.live
        if live.version == self.shown or len(live) < 2:
            return
        self.shown = live.version
        run = live.snapshot()
        sites = run_figures.call_sites(run)
        # A GAN's two tapes are two gradient calls a step: each gets its chart
        counts = [sum((s.file, s.line) == site for s in run.steps) for site in sites]
        charted = [site for site, n in zip(sites, counts) if n * 2 >= counts[0]][:2]
        with self.slot.container():
            for i, site in enumerate(charted):
                fig = charts.legible(run_figures.run_figure(run, site))
                fig.update_layout(title=f"live: {live.seen:,} gradient calls so far, line {site[1]}"
                                  + (f" ({live.thinned:,} older ones thinned to keep memory "
                                     "bounded)" if live.thinned else ""),
                                  height=480 if len(charted) == 1 else 400)
                st.plotly_chart(fig, config={"displaylogo": False}, key=f"live_run_{self.shown}_{i}")
