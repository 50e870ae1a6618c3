"""Tests of the change log (``tiers.changes``)."""
