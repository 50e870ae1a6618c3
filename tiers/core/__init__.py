"""The kernel every floor may use, beside the stores: the error tree, settings sections,
records, the frames to child processes, the garbage collector (:mod:`tiers.core.collector`),
events and the one model client (docs/architecture.md lists them)."""
