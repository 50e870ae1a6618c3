"""Tier 1, working memory: per-session windows, durable before an append is acknowledged."""
