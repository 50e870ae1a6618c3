"""The weaver's worker: its typed jobs and their line, the parts that run them, the index
builds beside it, its backoff and its events."""
