"""GetContext: a session's context block within one budget: its rules (naming, budget, query), its
assembly, the pins it shows, and what it counts of what it hands out."""
