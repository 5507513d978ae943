"""What a picture of the op graph shows, as one frozen value: the graph's choices (which
tape and call, layers, folds, plumbing...) that graph.build walks by, and the figure's
(legend, text size, the step, the picked node, the chart's px) that figures.op_graph draws by.
"""
from __future__ import annotations

import dataclasses
from typing import Optional, Union


@dataclasses.dataclass(frozen=True)
class View:
    """Hashable, so it is the memo key of what it draws. tape: only the ops that tape
    recorded (None: every op). call: index of one of the tape's gradient calls (or
    graph.ALL_CALLS). group: one node per Keras layer, except the layers (or group node
    ids) in `expand`; fold: a loop's repeated ops as one node, except the fold ids in
    `unfold`. path_only: only what the call's gradient flows through; backward: also the
    ops the call ran; plumbing: also variable bookkeeping and the backward pass's reshaping.
    The figure: legend over the chart, large_text for a projector, `current` the step's op,
    `picked` the ringed node, width/height the chart's px when the page knows them."""
    tape: Optional[int] = None
    call: Union[int, str, None] = None
    group: bool = True
    expand: tuple = ()
    unfold: tuple = ()
    path_only: bool = False
    fold: bool = True
    plumbing: bool = False
    backward: bool = False
    legend: bool = True
    large_text: bool = False
    current: Optional[str] = None
    picked: Optional[str] = None
    width: Optional[float] = None
    height: Optional[int] = None

    def __post_init__(self):
        # lists from widgets: kept as tuples so the view stays hashable
        object.__setattr__(self, "expand", tuple(self.expand))
        object.__setattr__(self, "unfold", tuple(self.unfold))

    def graph_part(self) -> "View":
        """Only what graph.build reads, the figure's choices at their defaults: the memo key
        of a walked graph (a step or a pick redraws the figure, not the graph)."""
        return dataclasses.replace(self, legend=True, large_text=False, current=None, picked=None,
                                   width=None, height=None)
