// gateway: the OpenAI-compatible HTTP API (chat completions with text and
// audio, streamed as server-sent events) in front of omnistage orchestrators:
// one, or several that a DNS name or a list gives, over whose ready ones calls
// spread. See docs/openai.md.
//
//   gateway --orchestrator=127.0.0.1:50051 --listen=127.0.0.1:8000 --model=omni-demo
//   gateway --orchestrator=dns:///omnistage-orchestrators:50051 ...   # every one DNS lists
//   curl -N http://127.0.0.1:8000/v1/chat/completions -d '{"model": "omni-demo",
//       "messages": [{"role": "user", "content": "Hi"}], "stream": true}'
//
// Prints one line "listening port=<port> address=<host:port>" once it serves.
// SIGTERM/SIGINT: drains — takes no new connection, answers /health, new
// completions and new Realtime sessions with 503, lets running ones finish for
// --drain_timeout_ms, closing each Realtime session with 1001 once its
// response ended — then exits 0 (what still runs is cancelled, which aborts it
// on every stage).
#include <signal.h>
#include <sys/resource.h>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/bearer_token.h"
#include "common/flags_usage.h"
#include "common/grpc/service_process.h"
#include "common/grpc/tls.h"
#include "common/host_port.h"
#include "common/listen_check.h"
#include "common/listening_line.h"
#include "common/log.h"
#include "common/plaintext_warning.h"
#include "common/tracing/tracing_flags.h"
#include "gateway/batch/batch_schema.h"
#include "gateway/batch/sqlite_database.h"
#include "gateway/gateway.h"
#include "gateway/http/http_server.h"
#include "gateway/http/http_tls.h"

ABSL_FLAG(std::string, listen, "127.0.0.1:8000", "host:port for HTTP clients; port 0 picks one");
ABSL_FLAG(std::string, orchestrator, "127.0.0.1:50051",
          "the orchestrator(s), as a gRPC target: host:port; a DNS name with an address per "
          "orchestrator (name:port, dns:///name:port, dns://DNS_SERVER/name:port); or "
          "ipv4:HOST:PORT,HOST:PORT. Calls go round robin to the ready ones");
ABSL_FLAG(std::string, tls_cert, "",
          "PEM certificate chain: serve HTTPS only (with --tls_key); re-read when it changes");
ABSL_FLAG(std::string, tls_key, "", "PEM private key of --tls_cert");
ABSL_FLAG(std::string, model, "omni-demo",
          "the model id clients name (the pipeline's name, as GET /v1/models lists it)");
ABSL_FLAG(int, text_stage, 0,
          "the pipeline stage that writes the text: max_tokens, temperature and seed go there");
ABSL_FLAG(int, voice_stage, -1,
          "the pipeline stage that speaks (the vocoder): audio.voice goes there as its extra "
          "parameter voice (alloy -> f2, onyx -> m7, ...); -1: audio.voice is not used");
ABSL_FLAG(std::string, hearing_orchestrator, "",
          "the orchestrator(s) of a pipeline that hears, whose stage 0 is a speech recogniser "
          "that passes typed text through (e.g. pipelines/local_voice_agent.yaml), as a gRPC "
          "target like --orchestrator, dialled with the same TLS: chat completions with "
          "input_audio parts and every Realtime session go there, as the same --model. Empty: "
          "they go to --orchestrator");
ABSL_FLAG(int, hearing_text_stage, 1,
          "the hearing pipeline's stage that writes the text (as --text_stage)");
ABSL_FLAG(int, hearing_voice_stage, 3,
          "the hearing pipeline's stage that speaks (as --voice_stage); -1: not used");
ABSL_FLAG(std::string, speech_orchestrator, "",
          "the orchestrator(s) of a speech pipeline, one that speaks the text it is given as "
          "written (e.g. pipelines/local_tts.yaml: talker -> vocoder), as a gRPC target like "
          "--orchestrator, dialled with the same TLS: POST /v1/audio/speech goes there. Empty: "
          "the speech routes answer 404");
ABSL_FLAG(int, speech_voice_stage, 1,
          "the speech pipeline's stage that speaks (its vocoder): voice and speed go there");
ABSL_FLAG(std::string, speech_models, "tts-1,tts-1-hd,gpt-4o-mini-tts",
          "the model names /v1/audio/speech takes, comma-separated");
ABSL_FLAG(std::string, transcription_orchestrator, "",
          "the orchestrator(s) of a listening pipeline, one whose stage 0 is a speech recogniser "
          "(e.g. pipelines/local_listener.yaml), as a gRPC target like --orchestrator, dialled "
          "with the same TLS: POST /v1/audio/transcriptions goes there. Empty: that route "
          "answers 404");
ABSL_FLAG(std::string, transcription_models, "whisper-1,gpt-4o-transcribe,gpt-4o-mini-transcribe",
          "the model names /v1/audio/transcriptions takes, comma-separated");
ABSL_FLAG(int, transcription_sample_rate_hz, 16000,
          "the rate uploads are resampled to before the listening pipeline hears them (its "
          "recogniser's: the listener's pocketsphinx hears 16 kHz), 8000 to 384000");
ABSL_FLAG(double, transcription_max_seconds, 1500,
          "the longest upload /v1/audio/transcriptions hears, in seconds (longer: 400)");
ABSL_FLAG(std::string, orchestrator_tls_ca, "",
          "PEM CA bundle the orchestrator's certificate must chain to: TLS to the orchestrator");
ABSL_FLAG(std::string, orchestrator_tls_cert, "",
          "PEM client certificate for the orchestrator (with --orchestrator_tls_key)");
ABSL_FLAG(std::string, orchestrator_tls_key, "", "PEM private key of --orchestrator_tls_cert");
ABSL_FLAG(std::string, orchestrator_tls_server_name, "",
          "the name the orchestrator's certificate carries, when it is not the host dialled");
ABSL_FLAG(int, max_connections, 10000,
          "HTTP connections open at once; one more is refused at once (a 503 on HTTP, then "
          "closed). 0: no limit");
ABSL_FLAG(int, max_connections_per_address, 1000,
          "HTTP connections open at once from one client address; one more is refused at "
          "once. Behind a proxy every client has its address: raise it there. 0: no limit");
ABSL_FLAG(int, request_read_timeout_ms, 20000,
          "a client must send a whole request (request line, headers, body) within this of "
          "connecting or of its previous response's end, else its connection is closed (a "
          "client trickling bytes holds nothing). 0: no limit");
ABSL_FLAG(int, max_header_bytes, 32768,
          "a request's line and headers together, in bytes; more is answered 400");
ABSL_FLAG(int, max_headers, 100, "header lines in a request; more is answered 431. 0: no limit");
ABSL_FLAG(int, drain_timeout_ms, 20000,
          "on SIGTERM, how long running chat completions, speech requests and Realtime "
          "responses may still finish before the process ends (they are then cancelled); each "
          "Realtime session is closed with 1001 (going away) once its response ended");
ABSL_FLAG(int, max_realtime_sessions, 1000,
          "Realtime API sessions (WebSockets on /v1/realtime) open at once; one more is refused "
          "with 503 before the upgrade. Each is an HTTP connection too (--max_connections). 0: "
          "no limit");
ABSL_FLAG(int, max_realtime_message_bytes, 16 << 20,
          "the largest message a Realtime client may send (its base64 audio included); larger "
          "closes the WebSocket with 1009");
ABSL_FLAG(int, realtime_ping_interval_ms, 30000,
          "how often the gateway pings each Realtime client (a WebSocket ping; clients answer "
          "with a pong by themselves)");
ABSL_FLAG(int, realtime_idle_timeout_ms, 90000,
          "a Realtime client that sends nothing, not even a pong, for this long is sent a close "
          "with 1001 (\"idle timeout\") and its connection ended; one that takes none of what "
          "is sent for as long is closed. More than --realtime_ping_interval_ms");
ABSL_FLAG(std::string, batch_database, "",
          "the SQLite file (created if absent) that keeps the Files and Batch APIs' files, "
          "batches and their lines across restarts (docs/openai.md, \"Files\"); put it on a "
          "persistent volume. Empty: those APIs answer 404");
ABSL_FLAG(int64_t, max_file_bytes, 200 << 20,
          "the largest file POST /v1/files takes (413 beyond it); with --batch_database, "
          "a request body may be this large (plus its form)");
ABSL_FLAG(std::string, batch_token_file, "",
          "a file holding the gateway's own bearer token (a tokens file entry with role "
          "gateway), with which it runs each batch's lines as the batch's owner; needed when "
          "the orchestrators take tokens (docs/openai.md, \"Batches\")");
ABSL_FLAG(int, batch_concurrency, 16,
          "batch lines running at once over every batch (they wait below every interactive "
          "request in the orchestrator's queue)");
ABSL_FLAG(int, max_batch_lines, 50000, "the most requests a batch's input file may hold");
ABSL_FLAG(std::string, log_format, "text", "log lines on stderr: text or json");
ABSL_FLAG(std::string, log_level, "info", "the least severe lines logged: debug, info, "
          "warning or error");

namespace omnistage {
namespace {

// Past the drain's deadline, how long Realtime sessions get to hear their
// response cancelled and close before their connections are cut.
constexpr absl::Duration kGoAwayGrace = absl::Seconds(1);
// What an upload's multipart form may add to its file: boundaries, part
// headers, the purpose.
constexpr size_t kMaxFormOverheadBytes = 64 << 10;

int Run() {
  StopSignals signals;
  // A client that closes its socket mid-write must not end the process.
  signal(SIGPIPE, SIG_IGN);
  // Every client is a connection (a file descriptor): as many as the system
  // allows this process, not the usual soft limit of 1,024.
  rlimit files;
  if (getrlimit(RLIMIT_NOFILE, &files) == 0 && files.rlim_cur < files.rlim_max) {
    files.rlim_cur = files.rlim_max;
    setrlimit(RLIMIT_NOFILE, &files);
  }

  if (absl::Status s = SetUpLogging("gateway", absl::GetFlag(FLAGS_log_format),
                                    absl::GetFlag(FLAGS_log_level));
      !s.ok()) {
    return StartRefused("gateway", s.message());
  }
  const std::string listen = absl::GetFlag(FLAGS_listen);
  if (absl::Status s = CheckCanListenAll({{"--listen", listen}}); !s.ok()) {
    return StartRefused("gateway", s.message());
  }
  absl::StatusOr<std::unique_ptr<Tracer>> tracer = StartTracing("gateway");
  if (!tracer.ok()) return StartRefused("gateway", tracer.status().message());
  GatewayOptions options;
  options.tracer = tracer->get();
  options.model.id = absl::GetFlag(FLAGS_model);
  options.model.text_stage = absl::GetFlag(FLAGS_text_stage);
  options.model.voice_stage = absl::GetFlag(FLAGS_voice_stage);
  options.orchestrator = absl::GetFlag(FLAGS_orchestrator);
  options.orchestrator_tls = TlsFiles{absl::GetFlag(FLAGS_orchestrator_tls_cert),
                                      absl::GetFlag(FLAGS_orchestrator_tls_key),
                                      absl::GetFlag(FLAGS_orchestrator_tls_ca)};
  options.orchestrator_tls_name = absl::GetFlag(FLAGS_orchestrator_tls_server_name);
  options.hearing_orchestrator = absl::GetFlag(FLAGS_hearing_orchestrator);
  options.hearing_model = options.model;
  options.hearing_model.text_stage = absl::GetFlag(FLAGS_hearing_text_stage);
  options.hearing_model.voice_stage = absl::GetFlag(FLAGS_hearing_voice_stage);
  if (options.hearing_model.text_stage < 0) {
    return StartRefused("gateway", "--hearing_text_stage takes 0 or more");
  }
  options.speech_orchestrator = absl::GetFlag(FLAGS_speech_orchestrator);
  options.speech_models.voice_stage = absl::GetFlag(FLAGS_speech_voice_stage);
  options.speech_models.names =
      absl::StrSplit(absl::GetFlag(FLAGS_speech_models), ',', absl::SkipWhitespace());
  if (options.speech_models.names.empty() || options.speech_models.voice_stage < 0) {
    return StartRefused("gateway", "--speech_models names at least one model, "
                                   "--speech_voice_stage takes 0 or more");
  }
  options.transcription.target.address = absl::GetFlag(FLAGS_transcription_orchestrator);
  options.transcription.models =
      absl::StrSplit(absl::GetFlag(FLAGS_transcription_models), ',', absl::SkipWhitespace());
  options.transcription.sample_rate_hz = absl::GetFlag(FLAGS_transcription_sample_rate_hz);
  options.transcription.max_seconds = absl::GetFlag(FLAGS_transcription_max_seconds);
  if (options.transcription.models.empty() || options.transcription.sample_rate_hz < 8000 ||
      options.transcription.sample_rate_hz > 384000 || !(options.transcription.max_seconds > 0)) {
    return StartRefused("gateway", "--transcription_models names at least one model, "
                                   "--transcription_sample_rate_hz takes 8000 to 384000, "
                                   "--transcription_max_seconds more than 0");
  }
  options.max_realtime_sessions = absl::GetFlag(FLAGS_max_realtime_sessions);
  const int max_realtime_message_bytes = absl::GetFlag(FLAGS_max_realtime_message_bytes);
  if (options.max_realtime_sessions < 0 || max_realtime_message_bytes < 1024) {
    return StartRefused("gateway", "--max_realtime_sessions takes 0 or more, "
                                   "--max_realtime_message_bytes 1024 or more");
  }
  options.realtime.max_message_bytes = static_cast<size_t>(max_realtime_message_bytes);
  const int ping_ms = absl::GetFlag(FLAGS_realtime_ping_interval_ms);
  const int idle_ms = absl::GetFlag(FLAGS_realtime_idle_timeout_ms);
  // Pings are what a live but silent client answers: the idle timeout must
  // leave room for one.
  if (ping_ms < 10 || idle_ms <= ping_ms) {
    return StartRefused("gateway", "--realtime_ping_interval_ms takes 10 or more, "
                                   "--realtime_idle_timeout_ms more than it");
  }
  options.realtime.ping_interval = absl::Milliseconds(ping_ms);
  options.realtime.idle_timeout = absl::Milliseconds(idle_ms);
  if (options.model.id.empty()) return StartRefused("gateway", "--model is empty");
  if (absl::Status s = CheckTlsFiles(options.orchestrator_tls, TlsSide::kClient); !s.ok()) {
    return StartRefused("gateway", absl::StrCat("--orchestrator_tls_*: ", s.message()));
  }
  const std::string tls_cert = absl::GetFlag(FLAGS_tls_cert);
  const std::string tls_key = absl::GetFlag(FLAGS_tls_key);
  if (tls_cert.empty() != tls_key.empty()) {
    return StartRefused("gateway", "--tls_cert and --tls_key go together");
  }
  std::unique_ptr<HttpTls> tls;
  if (!tls_cert.empty()) {
    absl::StatusOr<std::unique_ptr<HttpTls>> loaded = HttpTls::Load(tls_cert, tls_key);
    if (!loaded.ok()) return StartRefused("gateway", loaded.status().message());
    tls = *std::move(loaded);
  } else {
    WarnIfPlaintextExposed("the gateway", listen, false,
                           {"bearer tokens cross the network in the clear unless TLS ends in "
                            "front of the gateway",
                            "Set --tls_cert and --tls_key; see docs/openai.md"});
  }
  HttpLimits limits;
  limits.max_connections = absl::GetFlag(FLAGS_max_connections);
  limits.max_connections_per_address = absl::GetFlag(FLAGS_max_connections_per_address);
  limits.request_read_timeout = absl::Milliseconds(absl::GetFlag(FLAGS_request_read_timeout_ms));
  limits.max_headers = absl::GetFlag(FLAGS_max_headers);
  const int max_header_bytes = absl::GetFlag(FLAGS_max_header_bytes);
  if (limits.max_connections < 0 || limits.max_connections_per_address < 0 ||
      limits.request_read_timeout < absl::ZeroDuration() || limits.max_headers < 0 ||
      max_header_bytes < 256) {
    return StartRefused("gateway",
                        "--max_connections, --max_connections_per_address, "
                        "--request_read_timeout_ms and --max_headers take 0 or more, "
                        "--max_header_bytes 256 or more");
  }
  limits.max_header_bytes = static_cast<size_t>(max_header_bytes);
  const int64_t max_file_bytes = absl::GetFlag(FLAGS_max_file_bytes);
  if (max_file_bytes < 1 || max_file_bytes > (int64_t{1} << 31)) {
    return StartRefused("gateway", "--max_file_bytes takes 1 to 2147483648");
  }
  options.max_file_bytes = static_cast<size_t>(max_file_bytes);
  std::unique_ptr<SqliteDatabase> store;
  if (const std::string path = absl::GetFlag(FLAGS_batch_database); !path.empty()) {
    absl::StatusOr<std::unique_ptr<SqliteDatabase>> opened =
        SqliteDatabase::Open(path, BatchSchema());
    if (!opened.ok()) {
      return StartRefused("gateway", absl::StrCat("--batch_database: ", opened.status().message()));
    }
    store = *std::move(opened);
    options.batch_concurrency = absl::GetFlag(FLAGS_batch_concurrency);
    options.max_batch_lines = absl::GetFlag(FLAGS_max_batch_lines);
    if (options.batch_concurrency < 1 || options.max_batch_lines < 1) {
      return StartRefused("gateway", "--batch_concurrency and --max_batch_lines take 1 or more");
    }
    if (const std::string file = absl::GetFlag(FLAGS_batch_token_file); !file.empty()) {
      absl::StatusOr<std::string> token = ReadBearerTokenFile(file, "--batch_token_file");
      if (!token.ok()) return StartRefused("gateway", token.status().message());
      if (token->empty()) {
        return StartRefused("gateway", absl::StrCat("--batch_token_file: ", file, " is empty"));
      }
      options.batch_authorization = absl::StrCat("Bearer ", *token);
    }
    // An upload is its file and the form around it.
    limits.max_body_bytes =
        std::max(limits.max_body_bytes, options.max_file_bytes + kMaxFormOverheadBytes);
    LogInfo(absl::StrCat("Files and Batch APIs kept in ", path));
  }
  absl::StatusOr<std::unique_ptr<HttpServer>> server =
      HttpServer::Listen(listen, limits, tls.get());
  if (!server.ok()) return StartRefused("gateway", server.status().message());
  Gateway gateway(
      options, [http = server->get()](std::function<void()> task) { http->Post(std::move(task)); },
      std::move(store));
  (*server)->OnEvent([&gateway](HttpEvent event) { gateway.CountHttp(event); });
  (*server)->set_tracer(tracer->get());
  (*server)->Serve([&gateway](std::shared_ptr<HttpExchange> exchange) {
    gateway.Handle(std::move(exchange));
  });
  // --listen parsed when CheckCanListenAll passed.
  const std::string address =
      FormatHostPort(ParseHostPort(listen, PortRule::kListen)->host, (*server)->port());
  PrintListeningLine({(*server)->port(), address, {}});
  LogInfo(absl::StrCat("serving model '", options.model.id, "' on ", tls ? "https://" : "http://",
                       address, " for the orchestrator at ", options.orchestrator));
  const int signal_number = signals.Wait();
  // Drain: no new connection, completion or session; /health turns 503 so the
  // load balancer stops sending clients; running streams may finish, and each
  // Realtime session is closed (1001) once its response ended.
  const absl::Duration drain = absl::Milliseconds(absl::GetFlag(FLAGS_drain_timeout_ms));
  LogInfo(absl::StrCat(StopSignals::Name(signal_number), ", draining: ",
                       gateway.chat_completions(), " chat completion(s) and ",
                       gateway.realtime_responses(), " realtime response(s) get up to ",
                       absl::FormatDuration(drain), "; ", gateway.realtime_sessions(),
                       " realtime session(s) are closed as their responses end, ",
                       gateway.speech_requests(), " speech request(s) and ",
                       gateway.transcriptions(),
                       " transcription(s) get as long (signal again to stop at once)"));
  gateway.Drain();
  (*server)->StopListening();
  // A second signal ends the wait.
  const absl::Time deadline = absl::Now() + drain;
  const auto busy = [&gateway] {
    return gateway.chat_completions() > 0 || gateway.speech_requests() > 0 ||
           gateway.transcriptions() > 0 || gateway.realtime_responses() > 0 ||
           gateway.realtime_sessions() > 0 || gateway.batch_lines() > 0;
  };
  bool signalled = false;
  while (busy() && absl::Now() < deadline) {
    if (signals.WaitFor(absl::Milliseconds(50)) != 0) {
      signalled = true;
      break;
    }
  }
  if (gateway.chat_completions() > 0 || gateway.speech_requests() > 0 ||
      gateway.transcriptions() > 0 || gateway.realtime_responses() > 0) {
    LogWarning(absl::StrCat("stopping with ", gateway.chat_completions(),
                            " chat completion(s) and ", gateway.realtime_responses(),
                            " realtime response(s) still running, and ",
                            gateway.speech_requests(), " speech request(s) and ",
                            gateway.transcriptions(), " transcription(s); they are cancelled"));
  }
  if (gateway.batch_lines() > 0) {
    LogWarning(absl::StrCat("stopping with ", gateway.batch_lines(),
                            " batch line(s) running; they run again at the next start"));
  }
  // Batch lines are given up even at a second signal: their calls are
  // cancelled before the channels go.
  if ((gateway.realtime_sessions() > 0 && !signalled) || gateway.batch_lines() > 0) {
    // Their responses cancelled, the sessions are told (response.done, then
    // the close) before the connections go.
    gateway.GoAway();
    const absl::Time closed_by = absl::Now() + kGoAwayGrace;
    while ((gateway.realtime_sessions() > 0 || gateway.batch_lines() > 0) &&
           absl::Now() < closed_by) {
      if (signals.WaitFor(absl::Milliseconds(20)) != 0) break;
    }
  }
  (*server)->Stop();
  return 0;
}

}  // namespace
}  // namespace omnistage

int main(int argc, char** argv) {
  omnistage::SetUsage("Serves the OpenAI chat-completions API for an omnistage pipeline.",
                      "gateway/main.cc", {omnistage::kTracingFlagsFile});
  omnistage::ParseFlagsOrExit(argc, argv, "gateway");
  omnistage::ServiceRuntime runtime(argv[0]);  // Outlives everything Run() makes.
  return omnistage::Run();
}
