"""The Recall engine: vector, keyword and graph channels fused with Reciprocal Rank Fusion.

Not built yet: it arrives after Tier 3 and the Weaver.
"""
