"""Tier 3 on the embedded engine (``qdrant-edge-py``), one shard in one directory: the store
(:mod:`.store`, :class:`~tiers.semantic.vectors.edge.store.EdgeVectorStore`), the shard as it
is made, opened and copied (:mod:`.shard`, with its engine config: :mod:`.config`), its
generations (:mod:`.generations`) and the index builds and purges that make them
(:mod:`.builds`), deletes in steps (:mod:`.delete`), filters (:mod:`.filter`), its ids as
text (:mod:`.ids`), and the layout of a store's directory (:mod:`.layout`), with the move from
one layout to another (:mod:`.resharding`)."""
