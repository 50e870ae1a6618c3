"""Tests of the command lines (``daemon.cli``)."""
