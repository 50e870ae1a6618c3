"""Tests of the graph channel (``recall.graph``)."""
