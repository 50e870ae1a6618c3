"""Tests of the client (``stratad_client``, ``daemon/client/``)."""
