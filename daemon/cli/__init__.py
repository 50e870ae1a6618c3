"""The command-line tools: ``stratad`` and ``weaverctl``."""
