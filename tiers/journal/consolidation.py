"""The consolidation state of the episodes, in the state store (no TTL, so it never expires
with the journal): their marks, their stored extractions, and both by owner.

Key layout (raw bytes)::

    unindexed          <episode_id>                          -> mark
    pending            <episode_id>                          -> mark
    extractions        <episode_id>                          -> the consolidation record
    extraction_owners  <user_id> 0x00 <agent_id> 0x00 <id>   -> empty
    mark_owners        <user_id> 0x00 <agent_id> 0x00 <id>   -> empty

A mark is ``[flushed_at, user_id, agent_id, session_id]``. ``unindexed`` and ``pending`` are
written with the flush, atomically with the end of the session; the Weaver deletes the first
when the episode's chunks are in Tier 3 (stage 1) and the second when its summary, facts and
graph edges are (stage 2). ``extractions`` holds the episode's consolidation record (its
layout is the weaver's: ``weaver.consolidate``; declared here so that ``tiers`` names it too).

The owners' families list a scope's records and marked episodes, so that a Forget or an
export of one user reads that user's entries only, not every user's. An entry is written and
deleted with what it lists (a marked episode has one entry while either mark is left). In each,
the key ``b""`` says the entries are complete: a store written before them gets them at its
first call (:func:`extractions_of`, :func:`marked_of`), a one-time read of every record or
mark.
"""

from __future__ import annotations

import threading

from tiers.core.records import Episode, Scope, pack, unpack
from tiers.rocks import Batch, RocksStore

PENDING_CF = "pending"
UNINDEXED_CF = "unindexed"
EXTRACTIONS_CF = "extractions"
CONSOLIDATION_CFS = (PENDING_CF, UNINDEXED_CF, EXTRACTIONS_CF)
MARK_CFS = (UNINDEXED_CF, PENDING_CF)
EXTRACTION_OWNERS_CF = "extraction_owners"
MARK_OWNERS_CF = "mark_owners"
OWNER_CFS = (EXTRACTION_OWNERS_CF, MARK_OWNERS_CF)
_BUILT = b""


def _owner_key(owner: Scope, episode_id: str) -> bytes:
    return f"{owner.user_id}\x00{owner.agent_id}\x00{episode_id}".encode()


def _owned(state: RocksStore, owners_cf: str, user_id: str) -> list[tuple[str, Scope]]:
    out = []
    for key, _ in state.scan_prefix(owners_cf, user_id.encode() + b"\x00"):
        _user, agent_id, episode_id = key.decode().split("\x00")
        out.append((episode_id, Scope(user_id, agent_id)))
    return out


# -- the stored extractions -------------------------------------------------------------------
def extraction_owner(raw: bytes) -> Scope | None:
    """The scope a stored extraction records (``weaver.consolidate.encode_extraction``: its
    ``ep`` part); None for a record written without it."""
    doc = unpack(raw)
    ep = doc.get("ep") if isinstance(doc, dict) else None
    return Scope(ep["u"], ep["a"]) if isinstance(ep, dict) else None


def put_extraction(batch: Batch, episode_id: str, raw: bytes) -> None:
    """Stage the stored extraction ``raw`` of ``episode_id`` in ``batch`` (of the state
    store), with its owner's entry: every writer of a record writes it so."""
    batch.put(EXTRACTIONS_CF, episode_id.encode(), raw)
    owner = extraction_owner(raw)
    if owner is not None:
        batch.put(EXTRACTION_OWNERS_CF, _owner_key(owner, episode_id), b"")


def delete_extraction(batch: Batch, episode_id: str, raw: bytes) -> None:
    """Stage the delete of the stored extraction ``raw`` of ``episode_id``, and its owner's
    entry."""
    batch.delete(EXTRACTIONS_CF, episode_id.encode())
    owner = extraction_owner(raw)
    if owner is not None:
        batch.delete(EXTRACTION_OWNERS_CF, _owner_key(owner, episode_id))


def extractions_of(state: RocksStore, user_id: str) -> list[tuple[str, Scope]]:
    """The episode ids and owners of ``user_id``'s stored extractions (every agent's). A
    store written before the owners' entries gets them at the first call (one read of every
    record); the caller holds ``SemanticStore.write_lock``, as every writer of a record does."""
    if state.get(EXTRACTION_OWNERS_CF, _BUILT) is None:
        state.put_keys(
            EXTRACTION_OWNERS_CF,
            (
                _owner_key(owner, key.decode())
                for key, raw in state.scan(EXTRACTIONS_CF, b"")
                if (owner := extraction_owner(raw)) is not None
            ),
            _BUILT,
        )
    return _owned(state, EXTRACTION_OWNERS_CF, user_id)


# -- the marks ---------------------------------------------------------------------------------
def mark(episode: Episode) -> bytes:
    """The value of an episode's ``unindexed`` and ``pending`` marks."""
    scope = episode.scope
    return pack([episode.flushed_at_us, scope.user_id, scope.agent_id, episode.session_id])


def mark_owner(raw: bytes) -> Scope:
    """The scope a mark names."""
    _flushed, user_id, agent_id, _session = unpack(raw)
    return Scope(user_id, agent_id)


def put_mark_owner(batch: Batch, episode_id: str, raw: bytes) -> None:
    """Stage the owner's entry of the episode whose mark is ``raw``: with its first mark."""
    batch.put(MARK_OWNERS_CF, _owner_key(mark_owner(raw), episode_id), b"")


def delete_mark_owner(batch: Batch, episode_id: str, raw: bytes) -> None:
    """Stage the delete of the owner's entry of the episode whose mark is ``raw``: with its
    last mark."""
    batch.delete(MARK_OWNERS_CF, _owner_key(mark_owner(raw), episode_id))


def marked_of(state: RocksStore, user_id: str, lock: threading.Lock) -> list[tuple[str, Scope]]:
    """The ids and owners of ``user_id``'s episodes (every agent's) that a mark names. A
    store written before the owners' entries gets them at the first call (one read of every
    mark), holding ``lock``, which the weaver's stages hold to delete a mark (``Journal``): a
    mark deleted while the entries are built would leave its entry behind. (A Forget, the
    other deleter of marks, is the caller.)"""
    if state.get(MARK_OWNERS_CF, _BUILT) is None:
        with lock:
            if state.get(MARK_OWNERS_CF, _BUILT) is None:
                keys = {
                    _owner_key(mark_owner(raw), key.decode())
                    for cf in MARK_CFS
                    for key, raw in state.scan(cf, b"")
                }
                state.put_keys(MARK_OWNERS_CF, sorted(keys), _BUILT)
    return _owned(state, MARK_OWNERS_CF, user_id)
