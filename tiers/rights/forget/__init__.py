"""Forget: what it covers, the cascade through every tier, and the purge that leaves no byte."""
