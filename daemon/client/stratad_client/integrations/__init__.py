"""Integrations: Strata behind the interfaces agents already use.

Each package is one framework's interface over the Python client (:mod:`stratad_client`), with
its README, and needs that framework's extra installed (``pip install
'stratad-client[mcp]'``, ``[agents]``, ``[langgraph]``, ``[adk]``). They only map: requests
and replies to and from the daemon's API, with no retrieval logic of their own. The
connection (address, token, TLS) is the client's: its arguments, or ``STRATA_ADDRESS``,
``STRATA_TOKEN``, ``STRATA_TLS_CA`` and the rest (``docs/integrations.md``).

This package imports none of the frameworks; import the integration you need.
"""
