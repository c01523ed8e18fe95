// omni batches: the batches a gateway runs (its Batch API, docs/openai.md
// "Batches"): every owner's not finished, with their counts, as the
// gateway's GET /console/status lists them (with tokens on, an admin's
// token), as a table for people or, with --json, the list's JSON.
//
//   omni batches --gateway=https://gateway:8000 --tls_ca=ca.crt
//   batch                           owner  endpoint              status       done     failed
//   created batch_3f1c0e9a2b7d4c5e6f708192  alice  /v1/chat/completions  in_progress  40/100   1
//   2026-12-07 15:20:11
#ifndef OMNISTAGE_CLIENT_BATCHES_COMMAND_H_
#define OMNISTAGE_CLIENT_BATCHES_COMMAND_H_

#include <string>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"

namespace omnistage {

struct BatchesOptions {
  // The gateway's base URL: http://host:port or https://host:port.
  std::string gateway;
  // The bearer token ("" for none), and the CA an https gateway's
  // certificate must chain to ("" for the system's).
  std::string token;
  std::string tls_ca;
  bool json = false;
};

// Prints to stdout, errors to stderr; returns 0, 1 when the gateway refused
// or did not answer, 2 for a bad --gateway.
int RunBatches(const BatchesOptions& options);

// The console status's `batches` as a table; a line saying why when there
// are none (none running, or a gateway without the Batch API: null).
std::string FormatBatchesTable(const nlohmann::json& batches);

}  // namespace omnistage

#endif  // OMNISTAGE_CLIENT_BATCHES_COMMAND_H_
