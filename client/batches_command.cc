#include "client/batches_command.h"

#include <chrono>
#include <iostream>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "httplib.h"

namespace omnistage {
namespace {

constexpr auto kTimeout = std::chrono::seconds(10);

std::string Column(std::string text, size_t width) {
  if (text.size() < width) text.append(width - text.size(), ' ');
  return text;
}

}  // namespace

std::string FormatBatchesTable(const nlohmann::json& batches) {
  if (batches.is_null()) {
    return "this gateway runs no batches (it was started without --batch_database)\n";
  }
  if (batches.empty()) return "no batch running\n";
  std::vector<std::vector<std::string>> rows = {
      {"batch", "owner", "endpoint", "status", "done", "failed", "created"}};
  for (const nlohmann::json& b : batches) {
    const std::string owner = b.value("owner", "");
    rows.push_back(
        {b.value("id", ""), owner.empty() ? "(anonymous)" : owner, b.value("endpoint", ""),
         b.value("status", ""),
         absl::StrCat(b.value("completed", int64_t{0}), "/", b.value("total", int64_t{0})),
         absl::StrCat(b.value("failed", int64_t{0})),
         absl::FormatTime("%Y-%m-%d %H:%M:%S",
                          absl::FromUnixSeconds(b.value("createdAt", int64_t{0})),
                          absl::UTCTimeZone())});
  }
  std::vector<size_t> widths(rows[0].size(), 0);
  for (const auto& row : rows) {
    for (size_t i = 0; i < row.size(); ++i) widths[i] = std::max(widths[i], row[i].size());
  }
  std::string out;
  for (const auto& row : rows) {
    std::string line;
    for (size_t i = 0; i < row.size(); ++i) {
      line += i + 1 < row.size() ? Column(row[i], widths[i] + 2) : row[i];
    }
    absl::StrAppend(&out, line, "\n");
  }
  return out;
}

int RunBatches(const BatchesOptions& options) {
  const std::string& url = options.gateway;
  const bool tls = absl::StartsWith(url, "https://");
  if (!tls && !absl::StartsWith(url, "http://")) {
    std::cerr << "omni: --gateway='" << url << "' is not an http:// or https:// URL\n";
    return 2;
  }
  httplib::Client client(url);
  if (!client.is_valid()) {
    std::cerr << "omni: --gateway='" << url << "' cannot be used\n";
    return 2;
  }
  if (tls) {
    client.enable_server_certificate_verification(true);
    if (!options.tls_ca.empty()) client.set_ca_cert_path(options.tls_ca);
  }
  client.set_connection_timeout(kTimeout);
  client.set_read_timeout(kTimeout);
  httplib::Headers headers;
  if (!options.token.empty()) headers.emplace("Authorization", "Bearer " + options.token);
  httplib::Result result = client.Get("/console/status", headers);
  if (!result) {
    std::cerr << "omni: no answer from " << url << ": " << httplib::to_string(result.error())
              << "\n";
    return 1;
  }
  const nlohmann::json body = nlohmann::json::parse(result->body, nullptr, false);
  if (result->status != 200) {
    std::string message = result->body;
    if (!body.is_discarded() && body.contains("error")) {
      message = body["error"].value("message", message);
    }
    std::cerr << "omni: " << url << "/console/status: HTTP " << result->status << ": " << message
              << (result->status == 401 || result->status == 403 ? " (an admin's token sees it)"
                                                                 : "")
              << "\n";
    return 1;
  }
  if (body.is_discarded() || !body.is_object()) {
    std::cerr << "omni: " << url << "/console/status did not answer JSON\n";
    return 1;
  }
  const nlohmann::json batches = body.value("batches", nlohmann::json());
  if (options.json) {
    std::cout << batches.dump() << "\n";
  } else {
    std::cout << FormatBatchesTable(batches);
  }
  return 0;
}

}  // namespace omnistage
