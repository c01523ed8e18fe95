"""omnistage: a Python client for an omnistage orchestrator.

    from omnistage import Client
    with Client("127.0.0.1:50051") as client:
        for item in client.generate("Tell me about the sea."):
            ...  # Output chunks as they arrive, then one Finished
        client.abort(["req-3"])   # {"req-3": "aborted"}
        client.status()           # omnistage.protos.orchestrator_pb2.PipelineStatus
        # Input that streams in while the outputs stream out (GenerateDuplex):
        for item in client.generate_duplex(iter(["Hello there. ", "Good bye."])):
            ...

Uses grpcio and protobuf (Debian's python3-grpcio and python3-protobuf).
"""
from omnistage.client import Audio, Client, Finished, Output, Unreachable, clean_token

__all__ = ["Audio", "Client", "Finished", "Output", "Unreachable", "clean_token"]
