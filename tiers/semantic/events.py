"""The events :class:`tiers.semantic.store.SemanticStore` publishes on its bus
(``SemanticStore.events``): a write in a user's scope, for the caches derived from Tier 3
(the recall cache, the graph channel's kept graphs), and Tier 3's opening, once."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Tier3Written:
    """Event of :attr:`SemanticStore.events`: Tier 3 was written in ``user_id``'s scope;
    ``staged``: only points staged for the keyword channel (:meth:`SemanticStore.stage`),
    which are not in the vector store (what is derived from its points stays valid).
    ``ids``: every point id the write may have changed (written, deleted, its validity
    changed; none for edges alone), or None when not known (a delete by episode or by user),
    so that a cache of the scope's points can read those again rather than all of them."""

    user_id: str
    staged: bool = False
    ids: frozenset[str] | None = None


@dataclass(frozen=True, slots=True)
class Tier3Opened:
    """Event of :attr:`SemanticStore.events`, once: Tier 3 opened (``ok``) or failed to."""

    ok: bool
