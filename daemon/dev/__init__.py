"""Developer tools: the generated docs and the generated gRPC stubs."""
