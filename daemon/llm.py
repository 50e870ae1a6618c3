"""litellm, shared by the weaver's LLM extractor and the LLM reranker.

Importing litellm takes about 3 s and, by default, fetches a model cost map from the
network: it is imported once, lazily, off the request path, with the local cost map.
"""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass
from typing import Any

_lock = threading.Lock()
_litellm: Any = None


@dataclass
class LLMTotals:
    """Counters over a back-end's lifetime (the extractor's or the reranker's), updated under
    its owner's lock and read by the metrics collector."""

    extractions: int = 0  # the extractor's episodes (the reranker leaves these at 0)
    failed_extractions: int = 0
    llm_calls: int = 0  # requests sent
    failed_calls: int = 0
    prompt_tokens: int = 0  # from the replies' usage
    completion_tokens: int = 0


def import_litellm() -> Any:
    """The litellm module, imported once, offline."""
    global _litellm
    with _lock:
        if _litellm is None:
            os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
            import litellm

            litellm.suppress_debug_info = True  # no "Give Feedback / Get Help" on stdout
            _litellm = litellm
    return _litellm


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
