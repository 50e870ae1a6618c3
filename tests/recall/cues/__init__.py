"""Tests of the query's cues: speakers, times and updates (``recall.cues``)."""
