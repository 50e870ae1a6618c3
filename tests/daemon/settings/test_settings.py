from __future__ import annotations

import logging
from pathlib import Path

import pytest

from daemon.codec.status import ConfigError
from daemon.components import configured_vectors, model_cache
from daemon.settings import load_settings
from tests.contracts.vectors import mem, ready
from tiers.core.records import Scope
from tiers.semantic.vectors import OPEN_FIRST
from tiers.semantic.vectors.edge import layout
from tiers.semantic.vectors.shards.store import ShardedVectorStore
from tiers.semantic.vectors.storage import DenseStorage


def test_defaults_then_toml_then_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    assert load_settings().listen == "127.0.0.1:50051"
    assert load_settings().data_dir == Path(".strata")
    config = tmp_path / "strata.toml"
    config.write_text(
        'data_dir = "/srv/strata"\nsync = true\n[working_memory]\nmax_messages = 7\n'
        "[journal]\nttl_seconds = 60\n"
    )
    s = load_settings(config)
    assert (s.data_dir, s.sync, s.working_memory.max_messages) == (Path("/srv/strata"), True, 7)
    monkeypatch.setenv("STRATA_WORKING_MEMORY__MAX_MESSAGES", "9")
    monkeypatch.setenv("STRATA_CONFIG", str(config))
    s = load_settings()
    assert (s.working_memory.max_messages, s.journal.ttl_seconds) == (9, 60)


def test_the_dense_vectors_settings_are_one_value_for_the_stores(tmp_path, monkeypatch):
    assert load_settings().vectors.storage == DenseStorage("int8", "float16", rescore=False)
    config = tmp_path / "strata.toml"
    config.write_text('[vectors]\nquantization = "none"\noriginals = "float32"\n')
    monkeypatch.setenv("STRATA_VECTORS__RESCORE", "true")
    assert load_settings(config).vectors.storage == DenseStorage("none", "float32", rescore=True)


def test_the_shards_opened_at_the_start_are_those_the_setting_names(tmp_path, monkeypatch, caplog):
    """``vectors.open_first_mb`` reaches the daemon's embedded store: a shard of more than a MB
    is open when the store is ready with 1, and is left to the opener behind with the default."""
    monkeypatch.setenv("STRATA_DATA_DIR", str(tmp_path))
    caplog.set_level(logging.INFO, logger="strata.vectors")
    with ready(configured_vectors, load_settings()) as store:
        assert isinstance(store, ShardedVectorStore)
        scope = Scope("alice", "assistant")
        store.upsert([mem(f"alice memory {i}", scope=scope, seq=i, seed=i) for i in range(2000)])
    shard = next(i for i in range(store.shards) if layout.disk_bytes(store.path, i))
    assert 1 << 20 < layout.disk_bytes(store.path, shard) < OPEN_FIRST

    def opened_first() -> list[dict[str, object]]:
        return [r.fields for r in caplog.records if r.getMessage() == "vectors.opened_first"]

    with ready(configured_vectors, load_settings()):
        assert opened_first() == []
    monkeypatch.setenv("STRATA_VECTORS__OPEN_FIRST_MB", "1")
    with ready(configured_vectors, load_settings()) as again:
        assert shard in again.opened  # type: ignore[attr-defined]
        assert [(f["shards"], f["of"]) for f in opened_first()] == [(1, 1)]


@pytest.mark.parametrize(
    ("toml", "env", "reason"),
    [
        ("bogus = 1\n", {}, "bogus: Extra inputs are not permitted"),
        ("[journal]\nttl_days = 3\n", {}, "journal.ttl_days"),
        ("sync = \n", {}, "cannot read config file"),
        ("", {"STRATA_LISTEN": "no-port"}, "listen must be host:port"),
        ("", {"STRATA_JOURNAL__TTL_SECONDS": "0"}, "journal.ttl_seconds"),
        ("", {"STRATA_DATADIR": "x"}, "unknown setting in the environment: STRATA_DATADIR"),
        ("[limits]\nmax_content_bytes = 999999\n", {}, "must not exceed limits.max_message_bytes"),
        (
            "[vectors]\nshards = 0\n",
            {},
            "vectors.shards: Input should be greater than or equal to 1",
        ),
        ("", {"STRATA_VECTORS__SHARD_KEYS": "257"}, "vectors.shard_keys: Input should be less"),
    ],
)
def test_bad_config_is_one_clear_line(tmp_path, monkeypatch, toml, env, reason):
    config = tmp_path / "strata.toml"
    config.write_text(toml)
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    with pytest.raises(ConfigError) as err:
        load_settings(config)
    assert reason in str(err.value) and "\n" not in str(err.value)


def test_missing_config_file(tmp_path):
    with pytest.raises(ConfigError, match="does not exist"):
        load_settings(tmp_path / "nope.toml")


def test_the_model_cache_is_the_users_not_each_data_dirs(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    assert (
        model_cache(tmp_path / "a")
        == model_cache(tmp_path / "b")
        == (tmp_path / "cache" / "strata" / "models")
    )
    blocked = tmp_path / "file"
    blocked.write_text("not a directory")
    monkeypatch.setenv("XDG_CACHE_HOME", str(blocked))  # cannot be made: the data dir's
    assert model_cache(tmp_path / "a") == tmp_path / "a" / "models"


def test_every_value_of_a_setting_that_chooses_an_implementation_has_one() -> None:
    """The composition root's table (daemon/components.py): a new ``embedding.provider`` value
    without its row fails here, not at a user's start."""
    from typing import get_args

    from daemon.components import EMBEDDERS, VECTOR_STORES, vectors_backend
    from tiers.settings import EmbeddingSettings

    provider = EmbeddingSettings.model_fields["provider"].annotation
    assert set(EMBEDDERS) == set(get_args(provider))
    assert set(VECTOR_STORES) == {"embedded", "qdrant"}
    assert vectors_backend(load_settings()) == "embedded"
    assert vectors_backend(load_settings(qdrant_url="http://qdrant:6333")) == "qdrant"
