"""How Strata counts tokens.

A token is a run of up to 10 letters or digits (``\\w{1,10}``; longer runs count once per 10
characters) or a single other non-space character. Common English words are one token, as in
BPE tokenizers; long identifiers, numbers and blobs are not undercounted. It needs no model, is
the same for every client and deployment, and is fast. Every budget (``working_memory.max_tokens``,
the ``max_tokens`` of a read) uses this count.
"""

from __future__ import annotations

import re

_TOKEN = re.compile(r"\w{1,10}|[^\w\s]")


def count_tokens(text: str) -> int:
    return len(_TOKEN.findall(text))


def truncate_tokens(text: str, max_tokens: int) -> tuple[str, bool]:
    """``text`` up to the end of its first ``max_tokens`` tokens (as :func:`count_tokens`
    counts them; a run of more than 10 letters may be cut inside), and whether anything was
    cut off."""
    for i, match in enumerate(_TOKEN.finditer(text)):
        if i == max_tokens:
            return text[: match.start()].rstrip(), True
    return text, False
