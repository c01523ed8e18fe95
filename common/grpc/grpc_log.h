// gRPC's own log lines (gpr_log), such as
//   E1201 15:16:20.266 ssl_transport_security.cc:1501] Handshake failed with fatal
//   error SSL_ERROR_SSL: error:0A000086:SSL routines::certificate verify failed.
// come raw, before a program's own message that says the same in its words and
// names the fix. RouteGrpcLogs() sends them to common/log.h at debug level
// (--log_level=debug shows them, as text or JSON lines like any other), and
// keeps the reason of the last failed TLS handshake for that message.
// gRPC's assertion failures, which end the process, stay errors.
//
//   RouteGrpcLogs();   // in main, before any gRPC call
//   ...
//   if (!connected && LastTlsHandshakeFailure() == "certificate verify failed") ...
#ifndef OMNISTAGE_COMMON_GRPC_GRPC_LOG_H_
#define OMNISTAGE_COMMON_GRPC_GRPC_LOG_H_

#include <string>

namespace omnistage {

// Installs the route, unless $GRPC_VERBOSITY or $GRPC_TRACE is set (whoever
// set them asked for gRPC's own lines, as gRPC writes them). Thread-safe.
void RouteGrpcLogs();

// The reason OpenSSL gave for the last TLS handshake this process failed, as
// gRPC logged it ("certificate verify failed", "wrong version number"); "" if
// none failed (or the route is not installed). Thread-safe.
std::string LastTlsHandshakeFailure();

}  // namespace omnistage

#endif  // OMNISTAGE_COMMON_GRPC_GRPC_LOG_H_
