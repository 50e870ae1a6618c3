"""Tests of the stores (``tiers``)."""
