"""Strata's memory tiers: working memory (Tier 1), the episodic journal (Tier 2) and the
semantic store (Tier 3)."""
