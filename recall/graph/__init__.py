"""The graph channel: a scope's memory graph and the personalised PageRank walk over it."""
