"""The sections of the settings owned by the Memory Weaver: ``[weaver]`` and ``[llm]`` (the
LLM back-end of its extractor).

They are part of the one :class:`daemon.settings.Settings` object, which loads them.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import Field, field_validator, model_validator

from tiers.core.settings import Section
from tiers.semantic.digests import DigestPolicy


class WeaverSettings(Section):
    """The Memory Weaver."""

    enabled: bool = Field(True, description="Index and consolidate episodes into Tier 3.")
    interval_seconds: float = Field(
        600.0, gt=0, description="Consolidation runs this often (unless cron is set)."
    )
    cron: str = Field(
        "", description='A crontab expression ("*/10 * * * *") instead of interval_seconds.'
    )
    first_run_delay_seconds: float = Field(
        60.0,
        ge=0,
        description=(
            "A start that finds work left (episodes pending, or scopes whose profiles or "
            "digests wait for their rewrite: a restart) runs once this long after it, rather "
            "than at the schedule's next time; 0: the schedule alone. Not with ``cron``, whose "
            "runs keep to its times."
        ),
    )
    chunk_turns: int = Field(3, ge=1, description="Consecutive turns per episode chunk.")
    chunk_overlap: int = Field(1, ge=0, description="Turns shared by neighbouring chunks.")
    chunk_max_tokens: int = Field(200, ge=16, description="Tokens per chunk at most.")
    index_turns: bool = Field(
        True,
        description=(
            "Also index every turn alone (kind episode_turn), so a hit can cite exactly the "
            "turn that matched."
        ),
    )
    live_index: bool = Field(
        True,
        description=(
            "Index a live session's messages while it lives (with index_turns): each message "
            "is found by its words within milliseconds of its append, and by its meaning once "
            "its batch is embedded (live_batch_messages, live_batch_seconds); false: a "
            "session is indexed when it ends."
        ),
    )
    live_batch_messages: int = Field(
        8, ge=1, le=128, description="A live session's batch is embedded once this many wait."
    )
    live_batch_seconds: float = Field(
        5.0,
        gt=0,
        description="A live session's batch is embedded once its oldest message waited this long.",
    )
    chunk_vectors: Literal["embedded", "derived"] = Field(
        "embedded",
        description=(
            "embedded: each chunk's text is embedded; derived: a chunk's vector is the mean of "
            "its turns' (with index_turns), so each text is embedded once."
        ),
    )
    tool_call_max_tokens: int = Field(
        64,
        ge=1,
        description=(
            "Tokens of a tool call's arguments kept in the text the weaver indexes and extracts "
            'from (assistant called search_flights(to="JFK")); longer arguments are cut and end '
            "in an ellipsis."
        ),
    )
    tool_result_max_tokens: int = Field(
        100,
        ge=1,
        description=(
            "Tokens of a tool's result (a ROLE_TOOL message) kept in the text the weaver "
            "indexes and extracts from (search_flights returned: ...); a longer result is cut "
            "and ends in an ellipsis."
        ),
    )
    summary_turns: int = Field(4, ge=1, description="Turns in a local extractive summary.")
    digest_period_days: int = Field(
        7,
        ge=1,
        le=366,
        description=(
            "Days of a period digest: the episode summaries of a scope roll up into one "
            "digest per period (7: weeks from Monday), and the periods into the story so far."
        ),
    )
    story_periods: int = Field(
        12, ge=1, le=1000, description="Period digests in the story so far, the newest."
    )
    functional_predicates: list[str] = Field(
        ["lives_in", "works_at", "job_title", "married_to", "age", "relationship_status"],
        description="Predicates with one current value: a new value supersedes the old fact.",
    )

    @field_validator("cron")
    @classmethod
    def _check_cron(cls, value: str) -> str:
        if value:
            from apscheduler.triggers.cron import CronTrigger

            CronTrigger.from_crontab(value)  # raises ValueError with the reason
        return value

    def digest_policy(self) -> DigestPolicy:
        return DigestPolicy(self.digest_period_days, self.story_periods)

    @model_validator(mode="after")
    def _overlap(self) -> WeaverSettings:
        if self.chunk_overlap >= self.chunk_turns:
            raise ValueError("weaver.chunk_overlap must be less than weaver.chunk_turns")
        return self


class LLMSettings(Section):
    """The LLM back-end of the weaver (litellm). An empty model means the local extractor."""

    model: str = Field("", description='A litellm model ("openai/gpt-4o-mini"); "" = local.')
    api_base: str = Field("", description="The provider's base URL, if not the default.")
    api_key_env: str = Field("", description="The environment variable holding the API key.")
    api_key_file: Path | None = Field(
        None, description="A file holding the API key (instead of api_key_env)."
    )
    timeout_seconds: float = Field(60.0, gt=0, description="Per LLM call.")
    max_retries: int = Field(3, ge=0, description="Retries per episode, then on_failure.")
    digests: bool = Field(
        True,
        description=(
            "With a model, the weaver has it rewrite each digest it writes abstractively (one "
            "call per digest changed by a run; false: extractive digests)."
        ),
    )
    on_failure: Literal["wait", "local"] = Field(
        "wait",
        description='When the LLM fails an episode: "wait" keeps it pending and backs off '
        '(the local extractor does only episodes close to journal expiry); "local" has the '
        "local extractor do it at once.",
    )
    retry_backoff_seconds: float = Field(
        30.0, gt=0, description="First pause after a run the LLM failed (doubles each time)."
    )
    retry_backoff_max_seconds: float = Field(
        1800.0, gt=0, description="Longest pause while the LLM keeps failing."
    )

    @model_validator(mode="after")
    def _backoff(self) -> LLMSettings:
        if self.retry_backoff_max_seconds < self.retry_backoff_seconds:
            raise ValueError("llm.retry_backoff_max_seconds must be >= llm.retry_backoff_seconds")
        return self
