"""Tests of Tier 1, the working memory (``tiers.working``)."""
