"""Tests of the wire: validation and fuzzing of every RPC (``daemon.codec``)."""
