"""The Memory Weaver: consolidates journal episodes into the semantic store (Tier 3).

Today this package holds ``weaverctl``, the operators' command line; the consolidation job
arrives with Tier 3.
"""
