"""Tests of the vector stores (``tiers.semantic.vectors``)."""
