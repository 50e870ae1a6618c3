"""The ``[recall]`` section of the settings and its retrieval recipes (:class:`Recipe`,
``[recall.recipes.NAME]``), with the literals they name: :data:`Kind` and :data:`Category`.

:class:`RecallSettings` is part of the one :class:`daemon.settings.Settings` object, which
loads it; a :class:`recall.Query` carries the recipe it runs.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator

from tiers.core.settings import Section
from tiers.semantic.vectors import Kind

# A fact's category (weaver.categories.CATEGORIES).
Category = Literal["preference", "instruction", "correction"]


class Recipe(Section):
    """A retrieval recipe: which channels, how they are weighted and fused, what follows."""

    # Defaults tuned on the LoCoMo dev split, and checked leave-one-conversation-out
    # (docs/benchmarks.md): BM25 is the strongest channel on conversational turns with the
    # small default model; the graph channel (entity <-> memory PageRank) joins over
    # messages at a lower weight, where it adds multi-hop recall.
    vector_weight: float = Field(1.0, ge=0, description="RRF weight of the dense channel.")
    keyword_weight: float = Field(2.0, ge=0, description="RRF weight of the BM25 channel.")
    graph_weight: float = Field(
        0.4,
        ge=0,
        description=(
            "RRF weight of the graph channel (0: off unless requested); with per_message, "
            "its weight in the fusion over messages."
        ),
    )
    depth: int = Field(50, ge=1, le=1000, description="Candidates each channel contributes.")
    rrf_k: int = Field(20, ge=0, description="The k of Reciprocal Rank Fusion.")
    kinds: list[Kind] = Field(
        [], description="Kinds searched when a request names none (empty: all)."
    )
    superseded_factor: float = Field(
        0.5, ge=0, le=1, description="Score multiplier of a superseded fact."
    )
    updates_top: int = Field(
        5,
        ge=0,
        description=(
            "A question about the present puts a newer statement of a rival value right above "
            "an older one among this many best hits (recall.cues.updates; 0: off)."
        ),
    )
    updates_depth: int = Field(
        10,
        ge=1,
        description="How deep below the older statement its newer rival is looked for.",
    )
    updates_relevance: float = Field(
        0.3,
        ge=0,
        description=(
            "A newer rival is about the same thing when its cosine to the query is at least "
            "this times the older one's, ..."
        ),
    )
    updates_similarity: float = Field(
        0.5, ge=-1, le=1, description="... or when its cosine to the older one is this or more."
    )
    recency_half_life_days: float = Field(
        0.0, ge=0, description="Recency decay by event time (0: off)."
    )
    reinforcement: float = Field(
        0.0,
        ge=0,
        description=(
            "Access reinforcement: each time Pack or GetContext handed a memory to an agent "
            "(not Recall) lengthens its recency half-life by this fraction, "
            "half-life x (1 + reinforcement x accesses); needs recency_half_life_days "
            "(0: off)."
        ),
    )
    importance_weights: dict[Category, float] = Field(
        {},
        description=(
            'Score multiplier per fact category ("preference", "instruction", '
            '"correction"; missing: 1), set by the weaver on the facts it extracts.'
        ),
    )
    mmr_lambda: float = Field(
        1.0, ge=0, le=1, description="MMR relevance/diversity trade-off (1: off)."
    )
    kind_weights: dict[Kind, float] = Field(
        {"summary": 0.5, "profile": 0.25, "digest": 0.25, "thread": 0.25},
        description=(
            "Score multiplier per kind (missing: 1). A summary, an entity profile, a digest "
            "or a story thread cites several turns and answers few questions alone: it ranks "
            "below chunks and facts of the same fused score (LoCoMo dev, "
            "leave-one-conversation-out: docs/benchmarks.md)."
        ),
    )
    merge_sources: bool = Field(
        True, description="Merge hits that share a source message into one piece of evidence."
    )
    per_message: bool = Field(
        True,
        description=(
            "Each hit is one source message (its episode_turn point, or a fact drawn from it "
            "alone), and the graph channel joins the others' order over messages "
            "(recall.messages)."
        ),
    )
    answers_first: bool = Field(
        True,
        description=(
            "With per_message: a reply ranks just above the question turn it answers when "
            "both are hits (recall.messages.answers_first)."
        ),
    )
    order_sources: bool = Field(
        True,
        description=(
            "List each hit's sources by how much each matches the query (recall.provenance); "
            "off: in conversation order."
        ),
    )
    speaker_neutral: bool = Field(
        True,
        description=(
            "When the query names a speaker of its scope, the vector and keyword channels "
            "also search it without those names, fused at their weights "
            "(recall.cues.speakers): a question that names the wrong speaker still finds "
            "what was said."
        ),
    )
    time_cues: float = Field(
        2.0,
        ge=0,
        description=(
            "When the query names a date or a period (recall.cues.times: 'on 13 October "
            "2023', 'in July 2023', 'last week'), the vector and keyword channels also "
            "search within it, fused at this multiple of their weights (0: off; 2 chosen "
            "leave-one-conversation-out on LoCoMo, docs/benchmarks.md)."
        ),
    )
    learned_fusion: str = Field(
        "builtin",
        description=(
            'The learned fusion that reorders the hits (recall.learned): "builtin" (the '
            "model shipped, trained on the LoCoMo and RealMem dev sets and measured "
            "leave-one-conversation-out), a model file's path (make learned-fusion writes "
            "one), or empty: the hand-set fusion alone. Not applied when a reranker ran."
        ),
    )
    expand_digests: bool = Field(
        False,
        description=(
            "A digest or story thread among the hits is followed by its children (the "
            "summaries or period digests it was made from: recall.expansion)."
        ),
    )
    rerank: Literal["none", "llm", "local"] = Field("none", description="none, llm or local.")
    rerank_top: int = Field(30, ge=1, description="Candidates the reranker orders.")

    @field_validator("learned_fusion")
    @classmethod
    def _model_loads(cls, value: str) -> str:
        if value:
            from recall.learned import load  # the model's module imports this one's package

            load(value)  # LearnedFusionError is a ValueError: the settings say what is wrong
        return value

    @field_validator("kind_weights", "importance_weights")
    @classmethod
    def _non_negative(cls, value: dict[str, float]) -> dict[str, float]:
        bad = [k for k, w in value.items() if not w >= 0]
        if bad:
            raise ValueError(f"weights must be >= 0 (got {', '.join(bad)})")
        return value


THREADS = 3  # recall.threads: measured against the appends' latency (docs/benchmarks.md)


class RecallSettings(Recipe):
    """The Recall engine. Its own fields are the "default" recipe; ``recipes`` adds named
    ones (``[recall.recipes.precise]``), chosen per request by name."""

    max_k: int = Field(100, ge=1, description="The largest k a Recall may ask for.")
    threads: int = Field(
        THREADS,
        ge=1,
        le=64,
        description=(
            "Recall, Pack and GetContext queries computed at once; more wait their turn. "
            "Under a flood of queries on 2 cores, 3 kept the appends' p99 under 20 ms; more "
            "answer more queries per second and delay the appends served beside them "
            "(measured: docs/benchmarks.md, Serving first)."
        ),
    )
    recipes: dict[str, Recipe] = Field({}, description="More named recipes.")
    rerank_model: str = Field("", description="litellm model for rerank=llm; empty: llm.model.")
    rerank_timeout_seconds: float = Field(5.0, gt=0, description="Then the fused order stands.")
    cache_ttl_seconds: float = Field(
        0.0, ge=0, description="Semantic cache of recent queries (0: off)."
    )
    cache_size: int = Field(1024, ge=1, description="Entries in the semantic cache.")
    query_vector_cache: int = Field(
        256,
        ge=0,
        le=100_000,
        description=(
            "Query embeddings kept for the most recent (user, text) pairs, so a text asked "
            "again is not embedded again (0: off)."
        ),
    )
    graph_cache_mb: int = Field(
        256,
        ge=1,
        description="Memory for the graph channel's per-scope graphs; least recently used out.",
    )
    graph_warm_mb: int = Field(
        128,
        ge=0,
        description=(
            "At a start, the graphs of the users' feature files are loaded before they are "
            "asked for, the files written last first, until the graphs hold this much "
            "(graph_cache_mb at most; 0: none): the users active before a restart find their "
            "graph loaded at their first visit."
        ),
    )
    graph_files_min_memories: int = Field(
        200,
        ge=1,
        description=(
            "A scope with this many turns and facts or more keeps its graph's features on disk "
            "(<data_dir>/graphs), so it is built again fast after an eviction or a restart."
        ),
    )
    graph_large_scope: int = Field(
        20_000,
        ge=1,
        description=(
            "A scope with this many turns and facts or more builds its graph in the background "
            "(200,000 take 5-25 s from a cold store): until the first build is done its "
            "queries go on without the graph channel (reported degraded), and after a write "
            "they use the previous graph until the next is built."
        ),
    )
    graph_inline_reads: int = Field(
        1_000,
        ge=0,
        description=(
            "A scope's first graph build since the start (or an eviction) over more turns and "
            "facts than this (or chunks and facts when it has no turn) runs in the background, "
            "as a large scope's does: a point read and parsed costs 0.1-0.3 ms. Meanwhile its "
            "queries use the graph of its features on disk, if any, else go on without the "
            "graph. Also the point ids a user's writes are kept for, so that a kept graph "
            "reads those alone; past that it lists its scope again."
        ),
    )
    graph_wait_seconds: float = Field(
        0.0,
        ge=0,
        le=60,
        description=(
            "How long the query that starts a graph build in the background (a large scope's, "
            "or one of many reads) waits for it before it goes on without the graph "
            "(0: not at all; such a build takes 0.1 s or more)."
        ),
    )
    cache_similarity: float = Field(
        0.97, gt=0, le=1, description="Cosine above which a query counts as a repeat."
    )

    def recipe(self, name: str) -> Recipe:
        if not name or name == "default":
            return self
        return self.recipes[name]
