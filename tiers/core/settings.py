"""The base class of every section of the settings.

Each package owns its sections (``tiers.settings``, ``weaver.settings``, ``recall.recipe``,
``daemon.settings.sections``); they all derive from :class:`Section`, which lives here, in the
kernel every floor may import. The one :class:`daemon.settings.Settings` object holds them all.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class Section(BaseModel):
    """A section of the settings: an unknown key is an error."""

    model_config = ConfigDict(extra="forbid")
