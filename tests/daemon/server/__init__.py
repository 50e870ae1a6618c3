"""Tests of the server's parts: auth, TLS, metrics, GC pauses, the scheduler (``daemon.server``)."""
