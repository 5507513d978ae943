"""The run view while the program runs: the step summaries its job streamed so far
(state/live_steps.py), charted as the training page charts its run (draw/train_vega.py), and
redrawn in place while the page waits for the recording.

Vega-Lite, not plotly: Streamlit remounts a plotly chart, blank, whenever its figure changes,
so a chart redrawn every second was caught missing; a Vega-Lite chart whose spec stays the
same is fed its new rows in place. The words that change (how many calls so far) are text
above the charts."""
from __future__ import annotations

import streamlit as st

from ..draw import run_figures, train_vega
from . import panels

MAX_CHARTED = 2        # call sites charted at once: a GAN's two tapes, not every helper's
WARNINGS_SAID = 3      # the newest warnings said under the charts


class LivePanel:
    """One placeholder under the run's status; `update(job)` redraws it when new summaries
    came (a redraw per poll would send the charts a second for nothing)."""

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
        # A GAN's two tapes are two gradient calls a step: each gets its charts
        counts = [sum((s.file, s.line) == site for s in run.steps) for site in sites]
        charted = [site for site, n in zip(sites, counts) if n * 2 >= counts[0]][:MAX_CHARTED]
        # Each chart's whole height (title, axes, legend): Streamlit fits the plot inside
        loss_px, norms_px = (270, 320) if len(charted) == 1 else (230, 280)
        said = []
        with self.slot.container():
            for i, site in enumerate(charted):
                steps = run_figures.site_steps(run, site)
                warnings = run_figures.judge(steps)
                said += [w["message"] for w in warnings[-WARNINGS_SAID:]]
                thinned = (f" ({live.thinned:,} older ones thinned to keep memory bounded)"
                           if live.thinned else "")
                st.markdown(f"**live: {live.seen:,} gradient calls so far, line {site[1]}**{thinned}")
                st.vega_lite_chart(train_vega.loss_rows(steps), train_vega.loss_spec(
                    height=None, title=f"target (loss) per step, line {site[1]}"),
                    height=loss_px, key=f"live_loss_{i}")
                st.vega_lite_chart(train_vega.norm_rows(steps, warnings),
                                   train_vega.norm_spec(height=None), height=norms_px,
                                   key=f"live_norms_{i}")
                panels.show_histograms(steps, f"live_hist_{i}")
            for message in said[-WARNINGS_SAID:]:
                st.caption(f":warning: {message}")
