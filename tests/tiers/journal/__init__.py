"""Tests of Tier 2, the journal (``tiers.journal``)."""
