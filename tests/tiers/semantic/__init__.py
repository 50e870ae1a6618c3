"""Tests of Tier 3, the semantic store (``tiers.semantic``)."""
