"""The vector and keyword channels (the graph channel is in :mod:`recall.graph.channel`), and
the fan-out that runs a query's channels at once (:mod:`recall.channels.fanout`).

Each channel returns its hits best first, ties by id (scores equal to five significant digits:
:mod:`tiers.semantic.vectors.ranking`): the engine orders ties by where the points happen to be
stored, and the same memory must rank the same in every daemon that holds it (an imported copy,
a rebuilt store, a second ingestion), whatever order it was written in.
"""

from recall.channels.keyword import KeywordChannel
from recall.channels.vector import VectorChannel

__all__ = ["KeywordChannel", "VectorChannel"]
