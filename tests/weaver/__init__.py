"""Tests of the Memory Weaver (``weaver``)."""
