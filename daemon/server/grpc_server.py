"""The daemon's gRPC server: interceptors, services, health, reflection and credentials.

Interceptors, outermost first: metrics (when enabled: they see every RPC, rejected ones
included), authentication, then the malformed-request guard wrapping the real handlers. The
server listens with TLS when ``[tls]`` names a certificate and key, in plaintext otherwise.
:class:`daemon.app.Daemon` builds it, binds it, and starts and stops it.
"""

from __future__ import annotations

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection

from daemon.server import auth
from daemon.server.interceptors import MalformedRequestInterceptor
from daemon.services.admin import AdminService
from daemon.services.memory import MemoryService
from daemon.services.weaver import WeaverService
from daemon.settings import Settings
from stratad_client.pb import (
    admin_pb2,
    admin_pb2_grpc,
    memory_pb2,
    memory_pb2_grpc,
    weaver_pb2,
    weaver_pb2_grpc,
)

SERVICES = (
    memory_pb2.DESCRIPTOR.services_by_name["MemoryService"].full_name,
    admin_pb2.DESCRIPTOR.services_by_name["AdminService"].full_name,
    weaver_pb2.DESCRIPTOR.services_by_name["WeaverService"].full_name,
)
# Responses can be larger than requests (a window of large messages, an episode page).
MAX_SEND_BYTES = 64 * 1024 * 1024


def server_credentials(settings: Settings) -> grpc.ServerCredentials | None:
    """TLS credentials from ``[tls]``, or None for plaintext."""
    tls = settings.tls
    if tls.cert_file is None or tls.key_file is None:
        return None
    ca = tls.client_ca_file.read_bytes() if tls.client_ca_file is not None else None
    return grpc.ssl_server_credentials(
        [(tls.key_file.read_bytes(), tls.cert_file.read_bytes())],
        root_certificates=ca,
        require_client_auth=ca is not None,
    )


REASON_KEY = "strata-not-serving-reason"


class HealthServicer(health.aio.HealthServicer):
    """The standard health service; a NOT_SERVING answer for the daemon ("") carries why in the
    trailing metadata key ``strata-not-serving-reason`` (the protocol has no field for it)."""

    reason = ""

    async def Check(
        self, request: health_pb2.HealthCheckRequest, context: grpc.aio.ServicerContext
    ) -> health_pb2.HealthCheckResponse:
        response = await super().Check(request, context)
        not_serving = response.status == health_pb2.HealthCheckResponse.NOT_SERVING
        if self.reason and not request.service and not_serving:
            ascii_reason = self.reason.encode("ascii", "replace").decode()
            context.set_trailing_metadata(((REASON_KEY, ascii_reason),))
        return response


def build_server(
    settings: Settings,
    memory: MemoryService,
    weaver: WeaverService,
    admin: AdminService,
    metrics: grpc.aio.ServerInterceptor | None = None,
) -> tuple[grpc.aio.Server, HealthServicer]:
    """The server with its interceptors (``metrics`` outermost, when given), the three
    services, health and reflection; not bound yet (:func:`bind`). Returns it and its health
    servicer."""
    interceptors: list[grpc.aio.ServerInterceptor] = []
    if metrics is not None:
        interceptors.append(metrics)
    interceptors += auth.interceptors(settings.auth)  # after metrics: they count refusals too
    interceptors.append(MalformedRequestInterceptor())  # innermost: wraps the real handlers
    server = grpc.aio.server(
        interceptors=interceptors,
        options=[
            ("grpc.max_receive_message_length", settings.limits.max_request_bytes),
            ("grpc.max_send_message_length", MAX_SEND_BYTES),
        ],
    )
    memory_pb2_grpc.add_MemoryServiceServicer_to_server(memory, server)
    weaver_pb2_grpc.add_WeaverServiceServicer_to_server(weaver, server)
    admin_pb2_grpc.add_AdminServiceServicer_to_server(admin, server)
    health_servicer = HealthServicer()
    health_pb2_grpc.add_HealthServicer_to_server(health_servicer, server)
    reflection.enable_server_reflection(
        (*SERVICES, health.SERVICE_NAME, reflection.SERVICE_NAME), server
    )
    return server, health_servicer


def bind(server: grpc.aio.Server, settings: Settings) -> str:
    """Listen on ``settings.listen`` (with TLS when configured); returns the bound address
    (host:port, the real port when ``listen`` asked for port 0). Raises OSError."""
    try:
        credentials = server_credentials(settings)
        if credentials is None:
            port = server.add_insecure_port(settings.listen)
        else:
            port = server.add_secure_port(settings.listen, credentials)
    except RuntimeError as exc:
        raise OSError(f"cannot listen on {settings.listen}: {exc}") from None
    host = settings.listen.rpartition(":")[0]
    return f"{host}:{port}"
