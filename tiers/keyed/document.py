"""A keyed document (:mod:`tiers.keyed.documents` keeps them): its key in the state store
and the id of its Tier 3 point, both derived from scope, namespace and key; its value there;
its record in an export file, written (:meth:`Document.record`) and read back
(:func:`read_record`); and its Tier 3 point.

    K = <user_id> 0x00 <agent_id> 0x00 (<label> 0x00)* 0x01 <key>
"""

from __future__ import annotations

import hashlib
import json
import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from tiers.core.records import Scope, pack, unpack
from tiers.scoped import RecordReader, scope_fields
from tiers.semantic.vectors import MemoryPoint, Source

KIND = "document"
_END = b"\x01"  # ends the namespace labels, before the key


def scope_prefix(scope: Scope, *, any_agent: bool = False) -> bytes:
    """Every document of ``scope`` (of every agent of the user with ``any_agent``)."""
    user = scope.user_id.encode() + b"\x00"
    return user if any_agent else user + scope.agent_id.encode() + b"\x00"


def namespace_prefix(scope: Scope, labels: Iterable[str]) -> bytes:
    """Every document of ``scope`` whose namespace starts with ``labels``."""
    return scope_prefix(scope) + b"".join(label.encode() + b"\x00" for label in labels)


def storage_key(scope: Scope, namespace: Iterable[str], key: str) -> bytes:
    return namespace_prefix(scope, namespace) + _END + key.encode()


def parse_key(raw: bytes) -> tuple[Scope, tuple[str, ...], str]:
    user, agent, rest = raw.split(b"\x00", 2)
    labels, key = rest.split(_END, 1)
    namespace = tuple(label.decode() for label in labels.split(b"\x00")[:-1])
    return Scope(user.decode(), agent.decode()), namespace, key.decode()


def document_id(scope: Scope, namespace: Iterable[str], key: str) -> str:
    """The document's Tier 3 point id: a UUID of a hash of scope, namespace and key (never
    the text, so a replace overwrites the same point)."""
    h = hashlib.sha256(b"document\x00")
    h.update(storage_key(scope, namespace, key))
    return str(uuid.UUID(bytes=h.digest()[:16]))


@dataclass(frozen=True, slots=True)
class Document:
    scope: Scope
    namespace: tuple[str, ...]
    key: str
    text: str
    value: str  # a JSON document, or "" when none was given
    created_at_us: int
    updated_at_us: int

    @property
    def id(self) -> str:
        return document_id(self.scope, self.namespace, self.key)

    @property
    def storage_key(self) -> bytes:
        return storage_key(self.scope, self.namespace, self.key)

    def encode(self) -> bytes:
        return pack(
            {"t": self.text, "v": self.value, "c": self.created_at_us, "u": self.updated_at_us}
        )

    @classmethod
    def decode(cls, key: bytes, raw: bytes) -> Document:
        scope, namespace, name = parse_key(key)
        d = unpack(raw)
        return cls(scope, namespace, name, d["t"], d["v"], d["c"], d["u"])

    def record(self) -> dict[str, Any]:
        """Its export record (:mod:`tiers.rights.archive.format`: ``document``)."""
        return {
            "type": KIND,
            "id": self.id,
            **scope_fields(self.scope),
            "namespace": list(self.namespace),
            "key": self.key,
            "text": self.text,
            "value": self.value,
            "created_at_us": self.created_at_us,
            "updated_at_us": self.updated_at_us,
        }

    @property
    def recalled(self) -> bool:
        """Whether Recall finds it: a document put without text is only got and listed."""
        return bool(self.text)

    def point(self) -> MemoryPoint:
        """Its Tier 3 point: the text, and one source naming the document (no session, no
        message: ``metadata`` holds the namespace, as a JSON list, and the key)."""
        labels = list(self.namespace)
        source = Source(
            session_id="",
            seq=0,
            metadata={"namespace": json.dumps(labels, ensure_ascii=False), "key": self.key},
            created_at_us=self.updated_at_us,
        )
        return MemoryPoint(
            id=self.id,
            kind=KIND,
            text=self.text,
            scope=self.scope,
            episode_id="",
            session_id="",
            sources=[source],
            created_at_us=self.updated_at_us,
            extractor=KIND,
            attrs={"namespace": labels, "key": self.key},
        )


def read_record(d: dict[str, Any], reader: RecordReader) -> Document:
    """A ``document`` record of an export file (:meth:`Document.record`), checked."""
    lim = reader.limits
    labels = d.get("namespace")
    if not isinstance(labels, list) or len(labels) > lim.max_namespace_labels:
        raise ValueError(
            f"namespace must be a list of at most {lim.max_namespace_labels} labels"
            " (limits.max_namespace_labels)"
        )
    namespace = tuple(
        reader.id({f"namespace[{i}]": label}, f"namespace[{i}]") for i, label in enumerate(labels)
    )
    text = reader.string(d, "text", empty=True)
    value = reader.string(d, "value", empty=True)
    if (text and not text.strip()) or not (text or value):
        raise ValueError("text must not be only white space, and a document needs text or value")
    if len(text.encode()) + len(value.encode()) > lim.max_document_bytes:
        raise ValueError(
            f"text and value are over limits.max_message_bytes ({lim.max_document_bytes})"
        )
    if value:
        try:
            json.loads(value)
        except ValueError:
            raise ValueError("value is not valid JSON") from None
    doc = Document(
        reader.scope(d),
        namespace,
        reader.id(d, "key"),
        text,
        value,
        reader.micros(d, "created_at_us"),
        reader.micros(d, "updated_at_us"),
    )
    if doc.updated_at_us < doc.created_at_us:
        raise ValueError("updated_at_us is before created_at_us")
    reader.once(doc.storage_key, f"document {doc.key!r} of namespace {list(namespace)}")
    return doc
