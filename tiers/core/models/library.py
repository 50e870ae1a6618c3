"""litellm, the library every model call goes through: imported once, offline (with
``LITELLM_LOCAL_MODEL_COST_MAP=True`` set first, so that importing it does not fetch the model
cost map from the network) and with its own retries off; about 3 s, so never at module import,
and in the background once a model is configured (:func:`preload_litellm`)."""

from __future__ import annotations

import os
import threading
from typing import Any

# Held for the whole import: a caller that needs the module waits for it.
_importing = threading.Lock()
# Held only to read or set ``_preloading``: a preload asked while the import runs returns.
_preload_lock = threading.Lock()
_litellm: Any = None
_preloading = False


def import_litellm() -> Any:
    """The litellm module, imported once, offline, with its own retries off (waits for an
    import already under way)."""
    global _litellm
    with _importing:
        if _litellm is None:
            os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
            import litellm

            litellm.suppress_debug_info = True  # no "Give Feedback / Get Help" on stdout
            # litellm 1.106 turns max_retries=0 into this default for OpenAI embeddings
            # (``max_retries or DEFAULT_MAX_RETRIES``): the SDK would send 3 requests a call.
            setattr(litellm, "DEFAULT_MAX_RETRIES", 0)  # noqa: B010 - Final in its stubs
            _litellm = litellm
    return _litellm


def preload_litellm() -> None:
    """Import litellm in a thread of its own, once (about 3 s, longer on a busy machine), so
    that the first call of a configured model (a Recall's LLM rerank, say) does not wait for
    it on the request path. Returns at once, also while an earlier preload is importing: the
    daemon's start calls it once per configured model client."""
    global _preloading
    with _preload_lock:
        if _litellm is not None or _preloading:
            return
        _preloading = True
    threading.Thread(target=import_litellm, name="litellm-import", daemon=True).start()
