#include "common/grpc/grpc_log.h"

#include <cstdlib>

#include "absl/base/thread_annotations.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/strings/strip.h"
#include "absl/synchronization/mutex.h"
#include "common/log.h"
#include "grpc/support/log.h"

namespace omnistage {
namespace {

absl::Mutex handshake_mu(absl::kConstInit);
std::string* last_handshake_failure ABSL_GUARDED_BY(handshake_mu) = nullptr;

// "Handshake failed with fatal error SSL_ERROR_SSL: error:0A000086:SSL
// routines::certificate verify failed." -> "certificate verify failed".
std::string HandshakeReason(absl::string_view message) {
  constexpr absl::string_view kRoutines = "SSL routines::";
  const size_t at = message.find(kRoutines);
  absl::string_view reason = at == absl::string_view::npos
                                 ? absl::StripPrefix(message, "Handshake failed with fatal error ")
                                 : message.substr(at + kRoutines.size());
  return std::string(absl::StripSuffix(reason, "."));
}

void ToLog(gpr_log_func_args* args) {
  const absl::string_view message = args->message != nullptr ? args->message : "";
  if (absl::StartsWith(message, "Handshake failed")) {
    absl::MutexLock lock(&handshake_mu);
    if (last_handshake_failure == nullptr) last_handshake_failure = new std::string();
    *last_handshake_failure = HandshakeReason(message);
  }
  absl::string_view file = args->file != nullptr ? args->file : "";
  const size_t slash = file.rfind('/');
  if (slash != absl::string_view::npos) file.remove_prefix(slash + 1);
  const std::string line = absl::StrCat("grpc ", file, ":", args->line, ": ", message);
  Log(absl::StartsWith(message, "assertion failed") ? LogLevel::kError : LogLevel::kDebug, {},
      line);
}

}  // namespace

void RouteGrpcLogs() {
  if (std::getenv("GRPC_VERBOSITY") != nullptr || std::getenv("GRPC_TRACE") != nullptr) return;
  gpr_set_log_function(&ToLog);
}

std::string LastTlsHandshakeFailure() {
  absl::MutexLock lock(&handshake_mu);
  return last_handshake_failure != nullptr ? *last_handshake_failure : "";
}

}  // namespace omnistage
