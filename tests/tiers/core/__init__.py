"""Tests of the tiers' common parts: batching, events, models, priority (``tiers.core``)."""
