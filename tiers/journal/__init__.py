"""Tier 2, the episodic journal: ended sessions as episodes, kept for a TTL (`store`), and their
consolidation state, kept without one (`consolidation`; per scope: `stale`)."""
