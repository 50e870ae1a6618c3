"""The embedded vector store in shards: the store (:mod:`.store`,
:class:`~tiers.semantic.vectors.shards.store.ShardedVectorStore`), its shards opened as they
are needed (:mod:`.members`) and which of them need an index build or a purge
(:mod:`.ledger`)."""
