"""Tests of the client's integrations with agent frameworks (``stratad_client.integrations``)."""
