"""Tests of the RPC handlers' behaviour over gRPC (``daemon.services``)."""
