"""Tests of the weaver's jobs (``weaver.jobs``)."""
