"""The weaver's worker: its typed jobs, the index builds beside it, and its backoff."""
