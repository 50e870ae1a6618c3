"""Tests of the extractors (``weaver.extractors``)."""
