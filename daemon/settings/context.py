"""The ``[context]`` section of the settings: GetContext's defaults (how a session's context
shares its token budget, which memories it caps, how it formulates its query).

It is part of the one :class:`daemon.settings.Settings` object; it lives here so that
``daemon/settings/sections.py`` stays short. ``docs/api.md`` ("GetContext") explains the
budget order and the query rule.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, field_validator

from recall.recipe import Kind


class ContextSettings(BaseModel):
    """GetContext: the defaults a request may override (window_share, per_kind_caps)."""

    model_config = ConfigDict(extra="forbid")

    window_share: float = Field(
        0.5,
        ge=0,
        le=1,
        description=(
            "The window's share of the budget left after the anchor and the pins; the "
            "recalled memories get the rest, and what one part leaves unused goes to the other."
        ),
    )
    pinned_share: float = Field(
        0.25, ge=0, le=1, description="Pinned memories take at most this share of max_tokens."
    )
    per_kind_caps: dict[Kind, int] = Field(
        {"summary": 2, "profile": 2},
        description=(
            "At most this many recalled memories of a kind (a request's per_kind_caps replace "
            "the kinds they name): summaries and profiles cite many turns, a few are enough."
        ),
    )
    recall_k: int = Field(
        0,
        ge=0,
        le=1000,
        description=(
            "Memories GetContext asks Recall for, best first, to fill the budget from "
            "(0: recall.max_k, and never more)."
        ),
    )
    story_below_tokens: int = Field(
        1,
        ge=0,
        description=(
            "The scope's story so far (its story digest: tiers.semantic.digests) leads the "
            "recalled memories when the session's window holds fewer tokens than this "
            "(1: only a window with nothing in it, a new session; 0: never; a request's "
            "story field decides for itself). Measured: with the question in the window, the "
            "story costs evidence (docs/benchmarks.md, issue 31: digests and story threads)."
        ),
    )
    query_turns: int = Field(
        4,
        ge=1,
        le=50,
        description=(
            "Without a query, the names mentioned in this many of the newest messages join the "
            "last user message to make it."
        ),
    )

    @field_validator("per_kind_caps")
    @classmethod
    def _non_negative(cls, value: dict[str, int]) -> dict[str, int]:
        bad = [k for k, cap in value.items() if cap < 0]
        if bad:
            raise ValueError(f"per-kind caps must be >= 0 (got {', '.join(bad)})")
        return value
