"""Tests of GetContext's assembly, pins and sessions (``recall.context``)."""
