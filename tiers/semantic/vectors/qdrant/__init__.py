"""Tier 3 on ``qdrant-client``: the store (:mod:`.store`,
:class:`~tiers.semantic.vectors.qdrant.store.QdrantVectorStore`) and the collection as it lays
it out (:mod:`.collection`)."""
