"""litellm, shared by the weaver's LLM extractor and the LLM reranker.

Importing litellm takes about 3 s and, by default, fetches a model cost map from the
network: it is imported once, lazily, off the request path, with the local cost map.
"""

from __future__ import annotations

import os
import threading
from typing import Any

_lock = threading.Lock()
_litellm: Any = None


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
