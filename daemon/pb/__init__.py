"""Generated gRPC stubs (python -m daemon.protogen). Do not edit."""
