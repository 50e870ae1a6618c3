"""Prompt helpers shared by the weaver's LLM extractor and the LLM reranker.

The model client itself (litellm's import, keys, retries, counters) is
:class:`tiers.core.models.ModelClient`. These helpers live on the lowest floor so that both
``weaver`` and ``recall`` may use them.
"""

from __future__ import annotations

# Characters that end a line for some readers although json.dumps(ensure_ascii=False) leaves
# them as they are: NEL, LINE SEPARATOR, PARAGRAPH SEPARATOR (str.splitlines, many
# tokenizers and chat templates). The other C1 controls go too: they have no business in a
# prompt. ``<`` and ``>`` are escaped so that no text can write the closing delimiter.
_DATA_ESCAPES = {c: f"\\u{c:04x}" for c in (*range(0x80, 0xA0), 0x2028, 0x2029, 0x3C, 0x3E)}


def escape_data(json_text: str) -> str:
    """JSON text made safe to put between prompt delimiters: still the same JSON value (the
    escapes are JSON's own), and one line per line of the input. Only for JSON in which these
    characters can occur inside strings alone (the output of ``json.dumps``)."""
    return json_text.translate(_DATA_ESCAPES)
