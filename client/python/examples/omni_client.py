#!/usr/bin/python3
"""A Python client for an omnistage orchestrator, on the omnistage package.

Build the package tree once (it holds the generated stubs too), then either
install it (pip install bazel-bin/client/python/package, see docs/clients.md)
or point PYTHONPATH at it, and run with a Python that has grpcio (Debian's
/usr/bin/python3 with python3-grpcio):

    bazel build //client:python_package
    PYTHONPATH=bazel-bin/client/python/package /usr/bin/python3 client/python/examples/omni_client.py \
        --server 127.0.0.1:50051 --prompt "Tell me about the sea." --wav out.wav

Streams text to stdout as it arrives and, with --wav, saves the audio as a WAV
file. Exit codes: 0 finished, 1 failed, 2 bad usage (a token that cannot be sent), 3 aborted,
4 orchestrator unreachable.
"""
import argparse
import os
import sys
import wave

# gRPC's own log lines (a failed TLS handshake's, each retry) would come raw
# before this program's message, which says what is wrong; set GRPC_VERBOSITY
# to see them.
os.environ.setdefault("GRPC_VERBOSITY", "NONE")
import grpc  # pylint: disable=wrong-import-position

import omnistage


def run(client, prompt, wav_path, timeout):
    pcm = bytearray()
    rate = 0
    finished = None
    for item in client.generate(prompt, timeout=timeout):
        if isinstance(item, omnistage.Finished):
            finished = item
        elif item.modality == "text":
            sys.stdout.write(item.text)
            sys.stdout.flush()
        elif item.modality == "audio":
            pcm += item.audio
            rate = item.sample_rate_hz
        else:
            sys.stdout.write(" ".join(map(str, item.tokens)) + " ")
    sys.stdout.write("\n")
    if pcm and wav_path:
        with wave.open(wav_path, "wb") as out:
            out.setnchannels(1)
            out.setsampwidth(2)
            out.setframerate(rate)
            out.writeframes(bytes(pcm))
        print(f"wrote {wav_path}: {len(pcm) / 2 / rate:.2f} s of audio", file=sys.stderr)
    print(f"{finished.request_id}: {finished.finish_reason}", file=sys.stderr)
    if finished.ok:
        return 0
    if finished.finish_reason == "abort":
        return 3
    print(f"error: {finished.error}", file=sys.stderr)
    return 1


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--server", default="127.0.0.1:50051")
    parser.add_argument("--prompt", required=True)
    parser.add_argument("--wav", default="", help="save the audio here (none when empty)")
    parser.add_argument("--timeout", type=float, default=60.0)
    parser.add_argument("--tls_ca", help="PEM CA bundle: connect over TLS, verifying the server")
    parser.add_argument("--tls_cert", help="PEM client certificate (with --tls_key)")
    parser.add_argument("--tls_key", help="PEM private key of --tls_cert")
    parser.add_argument("--token_file",
                        help="file holding the bearer token (default: $OMNISTAGE_TOKEN)")
    args = parser.parse_args()
    token, source = os.environ.get("OMNISTAGE_TOKEN", ""), "$OMNISTAGE_TOKEN"
    if args.token_file:
        with open(args.token_file) as f:
            token, source = f.read(), f"--token_file={args.token_file}"
    try:
        token = omnistage.clean_token(token, source)
    except ValueError as error:
        print(error, file=sys.stderr)
        return 2
    try:
        client = omnistage.Client(args.server, tls_ca=args.tls_ca, tls_cert=args.tls_cert,
                                  tls_key=args.tls_key, token=token)
    except omnistage.Unreachable as error:
        print(f"cannot reach the orchestrator: {error}", file=sys.stderr)
        return 4
    with client:
        try:
            return run(client, args.prompt, args.wav, args.timeout)
        except grpc.RpcError as error:
            print(f"generate failed: {error.code().name}: {error.details()}", file=sys.stderr)
            return 1


if __name__ == "__main__":
    sys.exit(main())
