"""The gRPC services, one handler object per group of RPCs: each converts a request, calls one
function below and converts the answer."""
