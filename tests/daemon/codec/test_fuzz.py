"""Property-based fuzzing of every RPC of the daemon's services over real gRPC.

The RPCs are enumerated from the generated descriptors (``stratad_client.pb``), so a new
RPC is fuzzed as soon as it is in the ``.proto``. Two inputs per RPC, on one throwaway daemon:

- *fields*: the request message built from its descriptor with random field combinations
  (any subset of fields set): random and adversarial unicode, huge strings, out-of-range and
  unknown enum values, negative and extreme numbers, invalid timestamps, big repeated fields,
  plus ids the daemon issued (sessions, episodes, hits) so the deep paths run too;
- *bytes*: random bytes sent as the raw request (identity serializers), most of them not a
  valid protobuf message, some a message with fields of the wrong wire type.

A client-streaming RPC (Import) gets the request as the one message of its stream.

Every answer must be a documented status code (OK, INVALID_ARGUMENT, NOT_FOUND,
FAILED_PRECONDITION, RESOURCE_EXHAUSTED, ALREADY_EXISTS, UNAVAILABLE): never UNKNOWN, INTERNAL
or UNIMPLEMENTED, and no DEADLINE_EXCEEDED within the generous per-call timeout. The daemon
must answer health afterwards. Backup destinations are confined to this module's temporary
directory: the test refuses to send one that would land elsewhere.

The number of cases per RPC and the status codes seen are printed at the end of the module.
"""

from __future__ import annotations

import os
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator
from typing import Any

import grpc
import pytest
from google.protobuf.message import DecodeError
from hypothesis import HealthCheck, given, reject, settings
from hypothesis import strategies as st

from daemon.settings import Settings
from stratad_client import StrataClientError
from stratad_client.pb import admin_pb2
from tests.support import QUIET, ThreadDaemon, wait_indexed
from tests.support.fuzz_target import RPCS, SERVICES, Fuzz, Rpc
from tests.support.fuzzing import TEMPLATES, Pooled, UnderTmp, fill, message_values, mutated

pytestmark = pytest.mark.daemon  # a daemon in this process (module fixtures)

FIELD_EXAMPLES = int(os.environ.get("STRATA_FUZZ_EXAMPLES", "80"))
BYTES_EXAMPLES = max(1, FIELD_EXAMPLES // 2)
# Streaming runs (RunNow) wait for a consolidation run each: fewer of them.
STREAM_DIVISOR = 3


@pytest.fixture(scope="module")
def fuzz(
    tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest
) -> Iterator[Fuzz]:
    for key in [k for k in os.environ if k.startswith("STRATA_")]:
        os.environ.pop(key)  # the module-scoped daemon cannot use the autouse clean-env fixture
    root = tmp_path_factory.mktemp("fuzz")
    daemon = ThreadDaemon(
        Settings(
            data_dir=root / "data",
            listen="127.0.0.1:0",
            shutdown_grace_seconds=2.0,
            weaver=QUIET,
        )
    )
    channel = grpc.insecure_channel(
        daemon.address, options=[("grpc.max_receive_message_length", -1)]
    )
    backups = root / "backups"
    backups.mkdir()
    state = Fuzz(
        daemon,
        channel,
        backups,
        defaultdict(list, {"session_id": ["fuzz-s1", "fuzz-s2"], "user_id": ["fuzz-u1"]}),
        defaultdict(Counter),
    )
    _seed(daemon, state)
    yield state
    channel.close()
    daemon.stop()
    lines = [f"fuzz: cases and status codes per RPC ({FIELD_EXAMPLES} field examples per RPC)"]
    total = 0
    for rpc in RPCS:
        counts = state.counts.get(rpc.name, Counter())
        total += counts["cases"]
        codes = ", ".join(f"{k} {v}" for k, v in sorted(counts.items()) if k != "cases")
        lines.append(f"  {rpc.name:<30} {counts['cases']:>5} cases: {codes}")
    lines.append(f"  total {total} cases")
    _report(request.config, lines)


def _report(config: pytest.Config, lines: list[str]) -> None:
    """Print past output capture, so the counts show in a normal ``pytest`` run."""
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    capture = config.pluginmanager.get_plugin("capturemanager")
    if reporter is None:
        return
    if capture is not None:
        with capture.global_and_fixture_disabled():
            reporter.write_line("")
            for line in lines:
                reporter.write_line(line)
    else:
        for line in lines:
            reporter.write_line(line)


def _seed(daemon: ThreadDaemon, state: Fuzz) -> None:
    """A few real sessions and episodes, indexed once the model is loaded (bounded wait)."""
    with daemon.client(timeout=30) as c:
        for i in range(3):
            sid = f"fuzz-seed-{i}"
            c.append(sid, f"I moved to Lisbon in {2020 + i}.", user_id="fuzz-u1", name="Ana")
            c.append(sid, "My cat Miso likes the balcony.", user_id="fuzz-u1", name="Ana")
            state.pools["episode_id"].append(c.end_session(sid).episode_id)
        state.pools["session_id"].append("fuzz-seed-0")
        wait_indexed(c, 90)
        for h in c.recall("Where does Ana live?", user_id="fuzz-u1", k=5).hits:
            state.pools["id"].append(h.id)


def _resolver(fuzz: Fuzz) -> Callable[[Any], Any]:
    def resolve(value: Any) -> Any:
        if isinstance(value, Pooled):
            pool = fuzz.pools[value.kind]
            return pool[value.index % len(pool)] if pool else ""
        if isinstance(value, UnderTmp):
            return f"{fuzz.backups}/{value.text}"
        return value

    return resolve


def _confined(fuzz: Fuzz, rpc: Rpc, payload: bytes) -> bool:
    """False for a Backup request whose destination would land outside the temp directory."""
    if rpc.request is not admin_pb2.BackupRequest:
        return True
    try:
        destination = admin_pb2.BackupRequest.FromString(payload).destination
    except DecodeError:
        return True  # the daemon cannot read it either
    if not destination.startswith("/"):
        return True  # relative: refused before the file system is touched
    if "\x00" in destination:
        return True  # the path cannot be opened
    base = str(fuzz.backups)
    return os.path.normpath(destination).startswith(base + os.sep)


# -- the tests -------------------------------------------------------------------------------


def _examples(rpc: Rpc, n: int) -> int:
    return max(3, n // STREAM_DIVISOR) if rpc.streaming else n


def _check_health(fuzz: Fuzz) -> None:
    with fuzz.daemon.client(timeout=10) as c:
        assert c.health() == "SERVING"


def test_templates_are_valid(fuzz: Fuzz) -> None:
    """The templates themselves are accepted (else the mutated cases test only validation)."""
    resolve = _resolver(fuzz)
    for rpc in RPCS:
        template = TEMPLATES.get(rpc.method.name)
        if template is None or rpc.method.name in ("EndSession", "Forget", "Backup", "Rebuild"):
            continue  # one-shot or destructive: their first call is fuzzed like the others
        payload = fill(rpc.request(), template, resolve).SerializeToString()
        assert fuzz.call(rpc, payload) == grpc.StatusCode.OK, rpc.name


# -- regressions: bugs the fuzzing found ----------------------------------------------------


def test_malformed_request_bytes_are_invalid_argument(fuzz: Fuzz) -> None:
    """Bytes that are not the request message were UNKNOWN ("Unexpected DecodeError")."""
    for payload in (b"\x00", b"\x0a\x05ab", b"\x0a\x02\xff\xfe"):  # bad tag, short, not UTF-8
        with pytest.raises(grpc.RpcError) as info:
            fuzz.channel.unary_unary("/strata.v1.MemoryService/Append")(payload, timeout=10)
        assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert info.value.details() == "the request is not a valid Append request message"
    stream = fuzz.channel.unary_stream("/strata.v1.WeaverService/RunNow")(b"\x00", timeout=10)
    with pytest.raises(grpc.RpcError) as info:
        list(stream)
    assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    # the same bytes in a valid message still work, and health is untouched
    with fuzz.daemon.client() as c:
        assert c.admin.stats().version
        assert c.health() == "SERVING"


@pytest.mark.parametrize("token", ["\u00b2", "\u0663", "9" * 5000, str(2**64), "-1", "1 "])
def test_get_episode_page_token_must_be_ascii_digits(fuzz: Fuzz, token: str) -> None:
    """ "²" passed str.isdigit() and then failed int(): INTERNAL. So did 5,000 digits."""
    with fuzz.daemon.client() as c, pytest.raises(StrataClientError) as info:
        c.get_episode(fuzz.pools["episode_id"][0], page_token=token)
    assert info.value.code == grpc.StatusCode.INVALID_ARGUMENT
    assert info.value.message == "page_token is not a token this server issued"


@pytest.mark.parametrize(
    ("name", "reason"),
    [
        ("a\x00b", "control characters"),
        ("a\nb", "control characters"),
        ("n" * 256, "a name longer than 255 bytes"),
        ("/".join(["d" * 200] * 21), "longer than 4096 bytes"),
    ],
)
def test_backup_destination_is_validated(fuzz: Fuzz, name: str, reason: str) -> None:
    """A NUL in the destination and over-long paths were INTERNAL (ValueError, ENAMETOOLONG)."""
    with fuzz.daemon.client() as c, pytest.raises(StrataClientError) as info:
        c.admin.backup(f"{fuzz.backups}/{name}")
    assert info.value.code == grpc.StatusCode.INVALID_ARGUMENT
    assert reason in (info.value.message or "")
    assert sorted(p.name for p in fuzz.backups.iterdir() if "\x00" in p.name) == []


def test_backup_destination_is_normalised(fuzz: Fuzz) -> None:
    with fuzz.daemon.client() as c:
        reply = c.admin.backup(f"{fuzz.backups}/norm/../normalised")
    assert reply.path == f"{fuzz.backups}/normalised"
    assert (fuzz.backups / "normalised" / "manifest.json").is_file()
    assert not (fuzz.backups / "norm").exists()


def test_backup_file_system_refusal_is_failed_precondition(fuzz: Fuzz) -> None:
    """An OSError of the file system is FAILED_PRECONDITION, not INTERNAL. /proc accepts no
    new directory (ENOENT, even for root), so nothing is written."""
    with fuzz.daemon.client() as c, pytest.raises(StrataClientError) as info:
        c.admin.backup("/proc/strata-fuzz-backup")
    assert info.value.code == grpc.StatusCode.FAILED_PRECONDITION
    assert "cannot write the backup to '/proc/strata-fuzz-backup'" in (info.value.message or "")
    (fuzz.backups / "a-file").write_text("x")
    with fuzz.daemon.client() as c, pytest.raises(StrataClientError) as info:
        c.admin.backup(f"{fuzz.backups}/a-file/sub")
    assert info.value.code == grpc.StatusCode.INVALID_ARGUMENT  # the parent is no directory


@pytest.mark.parametrize("rpc", RPCS, ids=[r.name for r in RPCS])
def test_fuzz_fields(fuzz: Fuzz, rpc: Rpc) -> None:
    _fuzz_values(fuzz, rpc, message_values(rpc.request.DESCRIPTOR))


@pytest.mark.parametrize("rpc", RPCS, ids=[r.name for r in RPCS])
def test_fuzz_mutated(fuzz: Fuzz, rpc: Rpc) -> None:
    template = TEMPLATES.get(rpc.method.name, {})
    _fuzz_values(fuzz, rpc, mutated(rpc.request.DESCRIPTOR, template))


def _fuzz_values(fuzz: Fuzz, rpc: Rpc, values: st.SearchStrategy[dict[str, Any]]) -> None:
    """Send requests built from ``values`` (field values by name), then check health."""
    resolve = _resolver(fuzz)

    @settings(
        max_examples=_examples(rpc, FIELD_EXAMPLES),
        deadline=None,
        database=None,
        suppress_health_check=[
            HealthCheck.too_slow,
            HealthCheck.data_too_large,
            HealthCheck.filter_too_much,
        ],
    )
    @given(values=values)
    def run(values: dict[str, Any]) -> None:
        payload = fill(rpc.request(), values, resolve).SerializeToString()
        if not _confined(fuzz, rpc, payload):
            reject()
        fuzz.call(rpc, payload)

    run()
    _check_health(fuzz)


@pytest.mark.parametrize("rpc", RPCS, ids=[r.name for r in RPCS])
def test_fuzz_raw_bytes(fuzz: Fuzz, rpc: Rpc) -> None:
    # Random bytes, and well-formed field tags followed by random payloads (wrong wire types,
    # bad lengths, invalid UTF-8 in strings).
    tagged = st.builds(
        lambda tag, body: bytes([tag]) + body,
        st.sampled_from([0x08, 0x0A, 0x10, 0x12, 0x18, 0x1A, 0x22, 0x2A, 0x3A, 0x42, 0x4A]),
        st.binary(max_size=64),
    )

    @settings(
        max_examples=_examples(rpc, BYTES_EXAMPLES),
        deadline=None,
        database=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
    )
    @given(payload=st.one_of(st.binary(max_size=200), tagged))
    def run(payload: bytes) -> None:
        if not _confined(fuzz, rpc, payload):
            reject()
        fuzz.call(rpc, payload)

    run()
    _check_health(fuzz)


def test_every_rpc_is_fuzzed() -> None:
    names = {r.name for r in RPCS}
    for service in SERVICES:
        for m in service.methods:
            assert f"{service.name}.{m.name}" in names
    assert len(names) >= 14
