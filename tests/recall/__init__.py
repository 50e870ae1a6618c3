"""Tests of Recall (``recall``)."""
