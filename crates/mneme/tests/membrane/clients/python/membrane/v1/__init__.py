"""Generated protobuf bindings for the Membrane gRPC API."""
