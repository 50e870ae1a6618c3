"""Generated gRPC stubs (python -m daemon.dev.protogen). Do not edit."""
