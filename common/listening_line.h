// The line a server prints on stdout once it serves, and the one way to read it
// back. It is a protocol between processes: the orchestrator reads it from the
// workers it spawns, tests and scripts from every binary they start.
//
//   listening port=50051 address=127.0.0.1:50051 metrics_port=9090 node=3fa2c1d0b9e8
//
// `port` comes first (scripts find the line by "listening port="), then
// `address` (host:port, the host as given to --listen), then the binary's own
// fields in a fixed order (metrics_port, health_port, peer_port, instance,
// node: each binary's main says which it prints). Values hold no spaces.
//
//   PrintListeningLine({port, FormatHostPort(host, port), {{"node", node}}});
//   absl::StatusOr<ListeningLine> line = FindListeningLine(output);
//   int metrics = line->Number("metrics_port");  // 0 when absent
//
// Thread-safe (no state); PrintListeningLine writes one whole line.
#ifndef OMNISTAGE_COMMON_LISTENING_LINE_H_
#define OMNISTAGE_COMMON_LISTENING_LINE_H_

#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace omnistage {

// What the line begins with.
inline constexpr absl::string_view kListeningPrefix = "listening port=";

struct ListeningLine {
  int port = 0;
  std::string address;
  // The other fields, in the order printed.
  std::vector<std::pair<std::string, std::string>> fields;

  // The value of field `key`; "" when absent.
  std::string Field(absl::string_view key) const;
  // Field `key` as a number (a port); 0 when absent or not a number.
  int Number(absl::string_view key) const;
};

// "listening port=<port> address=<address> <key>=<value>..." (no newline).
std::string FormatListeningLine(const ListeningLine& line);

// Writes FormatListeningLine(line) and a newline to stdout, and flushes it.
void PrintListeningLine(const ListeningLine& line);

// The first complete line (ending in '\n', or the end of `output` when it has
// no newline after it) of `output` that begins with kListeningPrefix, parsed.
// NOT_FOUND when there is none yet; INVALID_ARGUMENT, quoting it, when it is
// not of the form above.
absl::StatusOr<ListeningLine> FindListeningLine(absl::string_view output);

}  // namespace omnistage

#endif  // OMNISTAGE_COMMON_LISTENING_LINE_H_
