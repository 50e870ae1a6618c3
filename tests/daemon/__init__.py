"""Tests of the daemon, its services, clients and adapters (``daemon``)."""
