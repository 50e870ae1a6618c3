"""The change log: what changed in a scope's memory, in one order, for ``MemoryService.Watch``
(:mod:`tiers.changes.log`)."""
