"""The keyed-document RPCs of ``strata.v1.MemoryService``: PutDocument, GetDocument,
DeleteDocument and ListDocuments (the store is :mod:`tiers.keyed.documents`).

A document belongs to exactly one scope: the user (required; a token of one tenant may leave
it empty) and the agent (empty is a scope of its own). The tenant rules are Append's: a named
user must be one of the token's tenants. Put and Delete need the ``append`` right (a client
that may write a document may delete it), Get and List ``recall``. Delete goes through Forget
(:mod:`tiers.rights.forget.cascade`): tombstone, record, Tier 3 point, caches, then the purge.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass

import grpc

from daemon.codec import convert
from daemon.codec import validation as check
from daemon.codec.status import rpc
from daemon.services import tenancy
from daemon.settings.sections import LimitsSettings
from stratad_client.pb import memory_pb2 as pb
from tiers.core.errors import DocumentNotFound
from tiers.core.records import Scope
from tiers.keyed.document import document_id
from tiers.keyed.documents import DocumentStore
from tiers.rights.forget.cascade import Forgetter


@dataclass(frozen=True, slots=True)
class DocumentRpcs:
    """PutDocument, GetDocument, DeleteDocument, ListDocuments."""

    documents: DocumentStore
    forgetter: Forgetter
    limits: LimitsSettings

    def _address(
        self, scope: pb.Scope, namespace: list[str], key: str
    ) -> tuple[Scope, tuple[str, ...], str]:
        return (
            tenancy.user_scope(check.scope(scope, self.limits), "a document belongs to one user"),
            check.namespace(namespace, self.limits),
            check.document_key(key, self.limits),
        )

    @rpc
    async def PutDocument(
        self, request: pb.PutDocumentRequest, context: grpc.aio.ServicerContext
    ) -> pb.PutDocumentResponse:
        scope, namespace, key = self._address(request.scope, list(request.namespace), request.key)
        check.document_content(request.text, request.value, self.limits)
        doc, created = await asyncio.to_thread(
            self.documents.put, scope, namespace, key, request.text, request.value
        )
        return pb.PutDocumentResponse(document=convert.document(doc), created=created)

    @rpc
    async def GetDocument(
        self, request: pb.GetDocumentRequest, context: grpc.aio.ServicerContext
    ) -> pb.GetDocumentResponse:
        scope, namespace, key = self._address(request.scope, list(request.namespace), request.key)
        doc = await asyncio.to_thread(self.documents.get, scope, namespace, key)
        if doc is None:
            where = f"user {scope.user_id!r}" + (
                f", agent {scope.agent_id!r}" if scope.agent_id else ", no agent"
            )
            raise DocumentNotFound(
                f"no document with key {key!r} in namespace "
                f"{json.dumps(list(namespace), ensure_ascii=False)} ({where})"
            )
        return pb.GetDocumentResponse(document=convert.document(doc))

    @rpc
    async def DeleteDocument(
        self, request: pb.DeleteDocumentRequest, context: grpc.aio.ServicerContext
    ) -> pb.DeleteDocumentResponse:
        scope, namespace, key = self._address(request.scope, list(request.namespace), request.key)
        memory_id = document_id(scope, namespace, key)
        deleted = await asyncio.to_thread(self.forgetter.delete_document, memory_id)
        return pb.DeleteDocumentResponse(deleted=deleted)

    @rpc
    async def ListDocuments(
        self, request: pb.ListDocumentsRequest, context: grpc.aio.ServicerContext
    ) -> pb.ListDocumentsResponse:
        scope = tenancy.user_scope(
            check.scope(request.scope, self.limits), "documents are listed per user"
        )
        prefix = check.namespace(list(request.namespace_prefix), self.limits, "namespace_prefix")
        size = check.page_size(request.page_size, self.limits, default=50)
        page = await asyncio.to_thread(self.documents.page, scope, prefix, size, request.page_token)
        return pb.ListDocumentsResponse(
            documents=[convert.document(d) for d in page.documents],
            next_page_token=page.next_page_token,
        )
