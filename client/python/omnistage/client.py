"""The omnistage client class over the generated gRPC stubs."""
import dataclasses
from typing import Dict, Iterable, Iterator, List, Optional, Union

import grpc

from omnistage.protos import common_pb2
from omnistage.protos import orchestrator_pb2
from omnistage.protos import orchestrator_pb2_grpc


class Unreachable(ConnectionError):
    """No orchestrator answered at the address."""


@dataclasses.dataclass
class Output:
    """One chunk of a stage's output, as it arrived."""
    stage: int
    modality: str  # "text", "audio" or "tokens"
    text: str = ""
    audio: bytes = b""  # PCM signed 16-bit little-endian, mono
    sample_rate_hz: int = 0
    tokens: List[int] = dataclasses.field(default_factory=list)


@dataclasses.dataclass
class Audio:
    """Audio input for generate_duplex(): PCM signed 16-bit little-endian."""
    pcm: bytes
    sample_rate_hz: int
    channels: int = 1


@dataclasses.dataclass
class Finished:
    """The request's end: the last item generate() yields."""
    request_id: str
    finish_reason: str  # "stop", "length", "abort" or "error"
    error: str = ""  # the error's message when finish_reason is "error"

    @property
    def ok(self) -> bool:
        return self.finish_reason in ("stop", "length")


def clean_token(token: str, source: str = "token") -> str:
    """`token` without surrounding whitespace.

    Raises ValueError, naming `source` but never the token or a part of it, if
    what is left holds a space, a control character or anything beyond ASCII:
    gRPC cannot send such a token as metadata.
    """
    token = token.strip(" \t\r\n\v\f")
    for position, char in enumerate(token, start=1):
        if not "!" <= char <= "~":
            kind = ("a space" if char == " " else
                    "a control character" if char < " " or char == "\x7f" else
                    "a character beyond ASCII")
            raise ValueError(f"{source}: the bearer token holds {kind} (character {position}); "
                             "a token is one word of visible ASCII: check what wrote it there")
    return token


def _reason(value: int) -> str:
    return common_pb2.FinishReason.Name(value).replace("FINISH_REASON_", "").lower()


class Client:
    """A connection to one orchestrator. Thread-safe, like its gRPC channel."""

    def __init__(self, server: str = "127.0.0.1:50051", connect_timeout: float = 5.0, *,
                 tls: bool = False, tls_ca: Optional[str] = None,
                 tls_cert: Optional[str] = None, tls_key: Optional[str] = None,
                 tls_server_name: Optional[str] = None, token: Optional[str] = None):
        """Connects to `server` (host:port).

        TLS: tls=True, or any of tls_ca (PEM file the server's certificate must
        chain to; default: the system's roots), tls_cert and tls_key (PEM files of
        a client certificate, for an orchestrator that requires one).
        tls_server_name: the name the server's certificate must carry, when not
        the host of `server`. token: the bearer token sent with every call
        (surrounding whitespace, such as a file's last newline, is not part of
        it; a token with anything but visible ASCII inside raises ValueError,
        whose message never shows the token).
        """
        token = clean_token(token or "")
        self._metadata = [("authorization", "Bearer " + token)] if token else []
        if tls or tls_ca or tls_cert or tls_key:
            credentials = grpc.ssl_channel_credentials(
                root_certificates=_read(tls_ca), private_key=_read(tls_key),
                certificate_chain=_read(tls_cert))
            options = [("grpc.ssl_target_name_override", tls_server_name)] \
                if tls_server_name else []
            self._channel = grpc.secure_channel(server, credentials, options=options)
        else:
            self._channel = grpc.insecure_channel(server)
        try:
            grpc.channel_ready_future(self._channel).result(timeout=connect_timeout)
        except grpc.FutureTimeoutError:
            self._channel.close()
            how = (" over TLS (is it running, serving TLS, with a certificate that chains to "
                   "tls_ca and names the host?)" if tls or tls_ca or tls_cert or tls_key else
                   " (is it running? if it serves TLS, pass tls_ca)")
            raise Unreachable(f"no orchestrator answers at {server}{how}") from None
        self._stub = orchestrator_pb2_grpc.OrchestratorStub(self._channel)

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        self._channel.close()

    def generate(self, prompt: str, *, request_id: str = "",
                 modalities: Iterable[str] = (),
                 max_tokens: Optional[Dict[int, int]] = None,
                 extra: Optional[Dict[int, Dict[str, str]]] = None,
                 timeout: Optional[float] = None,
                 traceparent: Optional[str] = None) -> Iterator[Union[Output, Finished]]:
        """Streams one request: Output items as they arrive, then one Finished.

        modalities: "text", "audio", "tokens" (default: what the pipeline's final
        stages produce). max_tokens / extra: per stage id. Errors before the
        request started (bad input, overload, no live replica) raise
        grpc.RpcError; so does a broken stream or the deadline. Leaving the loop
        early cancels the call, and the orchestrator stops the request on every
        stage.
        """
        request = _request(prompt, request_id, modalities, max_tokens, extra)
        metadata = self._metadata + ([("traceparent", traceparent)] if traceparent else [])
        yield from _responses(self._stub.Generate(request, timeout=timeout, metadata=metadata))

    def generate_duplex(self, input: Iterable[Union[str, Audio, List[int]]], *,
                        prompt: str = "", request_id: str = "",
                        modalities: Iterable[str] = (),
                        max_tokens: Optional[Dict[int, int]] = None,
                        extra: Optional[Dict[int, Dict[str, str]]] = None,
                        timeout: Optional[float] = None,
                        traceparent: Optional[str] = None
                        ) -> Iterator[Union[Output, Finished]]:
        """Streams one request whose input streams in (GenerateDuplex).

        `input` yields stage 0's input after `prompt`: text (str), Audio, or
        token ids (a list of ints). It is read as the call runs, so a generator
        that waits for the user sends each piece the moment it exists; its end
        completes the input. Outputs stream back meanwhile, as generate()'s do,
        and the same errors apply; input past the orchestrator's limits ends
        the request with Finished("error").
        """
        first = orchestrator_pb2.GenerateInput(
            request=_request(prompt, request_id, modalities, max_tokens, extra))

        # An error of `input`'s (or a bad item) stops the call and is raised
        # here, not swallowed by gRPC's thread that reads `input`.
        failed: List[BaseException] = []
        calls: List[grpc.Call] = []

        def messages():
            yield first
            try:
                for item in input:
                    yield orchestrator_pb2.GenerateInput(input=orchestrator_pb2.InputChunk(
                        payloads=[_payload(item)]))
            except Exception as e:  # noqa: BLE001 - raised again below
                failed.append(e)
                if calls:  # Else the call ends with the input, and it is raised then.
                    calls[0].cancel()

        metadata = self._metadata + ([("traceparent", traceparent)] if traceparent else [])
        calls.append(self._stub.GenerateDuplex(messages(), timeout=timeout, metadata=metadata))
        try:
            yield from _responses(calls[0])
        except grpc.RpcError:
            if failed:
                raise failed[0] from None
            raise
        if failed:
            raise failed[0]


def _request(prompt, request_id, modalities, max_tokens, extra):
    request = orchestrator_pb2.GenerateRequest(prompt=prompt, request_id=request_id)
    for name in modalities:
        request.output_modalities.append(common_pb2.Modality.Value("MODALITY_" + name.upper()))
    stages = sorted(set((max_tokens or {}).keys()) | set((extra or {}).keys()))
    for stage in stages:
        params = request.stage_params.add(stage_id=stage)
        if max_tokens and stage in max_tokens:
            params.max_tokens = max_tokens[stage]
        for key, value in ((extra or {}).get(stage) or {}).items():
            params.extra[key] = str(value)
    return request


def _responses(call) -> Iterator[Union[Output, Finished]]:
    try:
        for response in call:
            for chunk in response.outputs:
                yield _output(chunk)
            if response.HasField("terminal"):
                terminal = response.terminal
                yield Finished(response.request_id, _reason(terminal.finish_reason),
                               terminal.error.message)
    finally:
        call.cancel()  # No-op once the stream ended.


def _payload(item) -> common_pb2.Payload:
    if isinstance(item, str):
        return common_pb2.Payload(text=common_pb2.TextDelta(text=item))
    if isinstance(item, Audio):
        return common_pb2.Payload(audio=common_pb2.AudioChunk(
            pcm_s16le=item.pcm, sample_rate_hz=item.sample_rate_hz, channels=item.channels))
    if isinstance(item, (list, tuple)) and all(isinstance(i, int) for i in item):
        return common_pb2.Payload(tokens=common_pb2.TokenIds(ids=list(item)))
    raise TypeError(f"generate_duplex input: expected str, Audio or a list of ints, got "
                    f"{type(item).__name__}")


def _read(path: Optional[str]) -> Optional[bytes]:
    if not path:
        return None
    with open(path, "rb") as f:
        return f.read()


def _output(chunk) -> Output:
    payload = chunk.payload
    kind = payload.WhichOneof("kind")
    if kind == "text":
        return Output(chunk.stage_id, "text", text=payload.text.text)
    if kind == "audio":
        return Output(chunk.stage_id, "audio", audio=payload.audio.pcm_s16le,
                      sample_rate_hz=payload.audio.sample_rate_hz)
    return Output(chunk.stage_id, "tokens", tokens=list(payload.tokens.ids))
