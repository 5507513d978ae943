"""The op graph's node categories, in legend order: what the walk (graph.py) makes, its
words (labels.py) say and the figures draw in their own colour and shape."""

VARIABLE_NODE = "variable"
WATCHED_CONSTANT = "watched_constant"
CONSTANT_NODE = "constant"
INTERMEDIATE = "intermediate"
FORWARD_OP = "forward_op"
BACKWARD_OP = "backward_op"
GROUP = "group"
REPEAT = "repeat"             # ops repeated from one line, folded into one node
UNRECORDED_OP = "unrecorded_op"   # ran inside the tape's block, but the tape did not record it
CATEGORIES = (VARIABLE_NODE, WATCHED_CONSTANT, CONSTANT_NODE, INTERMEDIATE, FORWARD_OP, BACKWARD_OP, GROUP,
              REPEAT, UNRECORDED_OP)
