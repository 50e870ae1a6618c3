"""Tests of the embedding model and its back-ends (``tiers.semantic.embedding``)."""
