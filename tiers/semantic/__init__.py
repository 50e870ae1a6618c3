"""Tier 3, the semantic store: one door (:mod:`tiers.semantic.store`) over the vectors, the fact
graph and the embedding model, with entity profiles and Forget's tombstones."""
