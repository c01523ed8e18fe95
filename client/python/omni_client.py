#!/usr/bin/python3
"""A Python client for an omnistage orchestrator, using Debian's python3-grpcio.

Build the stubs once, then run with Debian's Python (it alone can import grpc):

    bazel build //protos:orchestrator_proto_py
    PYTHONPATH=bazel-bin /usr/bin/python3 client/python/omni_client.py \
        --server 127.0.0.1:50051 --prompt "Tell me about the sea." --wav out.wav

Streams text to stdout as it arrives and saves audio to a WAV file. Exit codes:
0 finished, 1 failed, 3 aborted, 4 orchestrator unreachable.
"""
import argparse
import sys
import wave

import grpc

from protos import common_pb2
from protos import orchestrator_pb2
from protos import orchestrator_pb2_grpc


def generate(stub, prompt, wav_path, timeout):
    request = orchestrator_pb2.GenerateRequest(prompt=prompt)
    pcm = bytearray()
    rate = 0
    terminal = None
    request_id = ""
    for response in stub.Generate(request, timeout=timeout):
        request_id = response.request_id
        for chunk in response.outputs:
            kind = chunk.payload.WhichOneof("kind")
            if kind == "text":
                sys.stdout.write(chunk.payload.text.text)
                sys.stdout.flush()
            elif kind == "audio":
                pcm += chunk.payload.audio.pcm_s16le
                rate = chunk.payload.audio.sample_rate_hz
            elif kind == "tokens":
                sys.stdout.write(" ".join(map(str, chunk.payload.tokens.ids)) + " ")
        if response.HasField("terminal"):
            terminal = response.terminal
    sys.stdout.write("\n")
    if pcm and wav_path:
        with wave.open(wav_path, "wb") as out:
            out.setnchannels(1)
            out.setsampwidth(2)
            out.setframerate(rate)
            out.writeframes(bytes(pcm))
        print(f"wrote {wav_path}: {len(pcm) / 2 / rate:.2f} s of audio", file=sys.stderr)
    reason = common_pb2.FinishReason.Name(terminal.finish_reason)
    print(f"{request_id}: {reason}", file=sys.stderr)
    if terminal.finish_reason in (common_pb2.FINISH_REASON_STOP, common_pb2.FINISH_REASON_LENGTH):
        return 0
    if terminal.finish_reason == common_pb2.FINISH_REASON_ABORT:
        return 3
    print(f"error: {terminal.error.message}", file=sys.stderr)
    return 1


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--server", default="127.0.0.1:50051")
    parser.add_argument("--prompt", required=True)
    parser.add_argument("--wav", default="omnistage.wav")
    parser.add_argument("--timeout", type=float, default=60.0)
    args = parser.parse_args()
    channel = grpc.insecure_channel(args.server)
    try:
        grpc.channel_ready_future(channel).result(timeout=5)
    except grpc.FutureTimeoutError:
        print(f"cannot reach the orchestrator at {args.server}", file=sys.stderr)
        return 4
    stub = orchestrator_pb2_grpc.OrchestratorStub(channel)
    try:
        return generate(stub, args.prompt, args.wav, args.timeout)
    except grpc.RpcError as error:
        print(f"generate failed: {error.code().name}: {error.details()}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
