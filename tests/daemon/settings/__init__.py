"""Tests of the settings (``daemon.settings``)."""
