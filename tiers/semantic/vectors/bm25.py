"""The keyword channel's encoder: BM25 sparse vectors from qdrant-edge's built-in model.

One tokenizer and one encoder for both vector store implementations, so a store written by
one can be searched through the other. Tokens are lower-cased, English stop words dropped and
the rest stemmed (Snowball); each token becomes a 32-bit hash index, so there is no
vocabulary to store. A *document* vector holds the BM25 term-frequency weights
(``k=1.2``, ``b=0.75``, ``avg_len=256``); a *query* vector has weight 1.0 per distinct token.
The IDF half of BM25 is applied by the engine at query time (the ``sparse`` vector is created
with the IDF modifier), over every point in the store.

Text with no indexable token (empty, blank, only stop words) gives an empty vector.
"""

from __future__ import annotations

import qdrant_edge

from tiers.semantic.vectors import SparseVector


class KeywordEncoder:
    """BM25 sparse vectors for documents and queries. Stateless; safe to share across
    threads."""

    def __init__(self, language: str = "english") -> None:
        self._bm25 = qdrant_edge.Bm25(qdrant_edge.Bm25Config(language=language))

    def embed_document(self, text: str) -> SparseVector:
        """The vector stored with a memory point."""
        return _convert(self._bm25.embed_document(text))

    def embed_query(self, text: str) -> SparseVector:
        """The vector to search the ``sparse`` channel with."""
        return _convert(self._bm25.embed_query(text))


def _convert(vector: qdrant_edge.SparseVector) -> SparseVector:
    return SparseVector(
        indices=[int(i) for i in vector.indices], values=[float(v) for v in vector.values]
    )
