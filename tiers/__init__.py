"""Strata's memory tiers: working memory (Tier 1), the episodic journal (Tier 2) and, later,
the semantic store (Tier 3)."""
