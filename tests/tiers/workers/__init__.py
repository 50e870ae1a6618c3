"""Tests of the worker processes (``tiers.workers``)."""
