"""The running server: gRPC, authentication, metrics, logs and the scheduled jobs."""
