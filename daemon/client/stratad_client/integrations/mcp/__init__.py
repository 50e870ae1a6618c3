"""``stratad-mcp``: Strata's memory as Model Context Protocol tools, through the client."""
