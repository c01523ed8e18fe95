#include "orchestrator/service/token_file.h"

#include <openssl/evp.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <fstream>
#include <sstream>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "common/limits.h"
#include "common/log.h"
#include "common/random_id.h"
#include "orchestrator/config/objective_defaults.h"
#include "orchestrator/config/yaml_fields.h"
#include "yaml-cpp/yaml.h"

namespace omnistage {
namespace {

std::string Sha256(absl::string_view text) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int size = 0;
  EVP_Digest(text.data(), text.size(), digest, &size, EVP_sha256(), nullptr);
  return std::string(reinterpret_cast<const char*>(digest), size);
}

bool IdentityChar(char c) {
  return absl::ascii_isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-' ||
         c == ':' || c == '@';
}

}  // namespace

absl::StatusOr<std::vector<TokenFile::Entry>> TokenFile::Parse(const std::string& path,
                                                               const std::string& text) {
  std::vector<Entry> entries;
  absl::Status status;
  try {
    status = yaml::CheckOneDocument(text);
    const YAML::Node root = status.ok() ? YAML::Load(text) : YAML::Node();
    yaml::Fields top(root, "", {"tokens"});
    const YAML::Node* list = status.ok() ? top.Find("tokens", /*required=*/true) : nullptr;
    if (status.ok()) status = top.status();
    if (status.ok() && !list->IsSequence()) {
      status = yaml::Expected(*list, "tokens", "a list of {identity, role, token}");
    }
    for (size_t i = 0; status.ok() && i < list->size(); ++i) {
      const std::string at = absl::StrCat("tokens[", i, "]");
      yaml::Fields fields(
          (*list)[i], at,
          {"identity", "role", "token", "priority", "max_priority", "weight", "requests_per_second",
           "requests_burst", "output_tokens_per_minute", "output_tokens_burst", "objectives"});
      Entry entry;
      std::string role;
      std::string token;
      fields.String("identity", &entry.caller.identity, /*required=*/true);
      fields.OneOf("role", {"user", "admin", "gateway"}, &role, /*required=*/true);
      fields.String("token", &token, /*required=*/true);
      int64_t priority = 0;
      int64_t max_priority = -1;
      int64_t weight = 1;
      fields.Int("priority", 0, kMaxPriority, &priority);
      fields.Int("max_priority", 0, kMaxPriority, &max_priority);
      fields.Int("weight", 1, kMaxWeight, &weight);
      RateLimits& rates = entry.caller.rate_limits;
      int64_t requests_burst = 0;
      int64_t tokens_per_minute = 0;
      int64_t tokens_burst = 0;
      fields.Number("requests_per_second", 0.001, 1e6, &rates.requests_per_second);
      fields.Int("requests_burst", 1, 1000000, &requests_burst);
      fields.Int("output_tokens_per_minute", 1, int64_t{1} << 40, &tokens_per_minute);
      fields.Int("output_tokens_burst", 1, int64_t{1} << 40, &tokens_burst);
      // A burst defaults to one second's requests (at least one) and one
      // minute's output tokens.
      rates.requests_burst = requests_burst > 0
                                 ? static_cast<double>(requests_burst)
                                 : std::max(1.0, std::ceil(rates.requests_per_second));
      rates.output_tokens_per_minute = static_cast<double>(tokens_per_minute);
      rates.output_tokens_burst =
          static_cast<double>(tokens_burst > 0 ? tokens_burst : tokens_per_minute);
      if (const YAML::Node* objectives = fields.Find("objectives")) {
        fields.Fail(ReadObjectiveDefaults(*objectives, fields.PathOf("objectives"),
                                          &entry.caller.objectives));
      }
      status = fields.status();
      if (status.ok() && max_priority >= 0 && max_priority < priority) {
        status = yaml::Invalid(fields.PathOf("max_priority"),
                               absl::StrCat("below priority (", priority, ")"));
      }
      entry.caller.priority = static_cast<int>(priority);
      // Without a ceiling, an identity may not ask for more than its default.
      entry.caller.max_priority = static_cast<int>(max_priority >= 0 ? max_priority : priority);
      entry.caller.weight = static_cast<int>(weight);
      if (!status.ok()) break;
      if (entry.caller.identity.empty() || entry.caller.identity.size() > kMaxIdentityBytes ||
          !std::all_of(entry.caller.identity.begin(), entry.caller.identity.end(), IdentityChar)) {
        status =
            yaml::Invalid(fields.PathOf("identity"), "1 to 128 of letters, digits and . _ - : @");
      } else if (token.size() < kMinTokenLength) {
        status = yaml::Invalid(
            fields.PathOf("token"),
            absl::StrCat("shorter than ", kMinTokenLength, " characters: it could be guessed"));
      } else if (std::any_of(token.begin(), token.end(), [](char c) {
                   return absl::ascii_isspace(static_cast<unsigned char>(c)) ||
                          absl::ascii_iscntrl(static_cast<unsigned char>(c));
                 })) {
        status = yaml::Invalid(fields.PathOf("token"), "contains spaces or control characters");
      }
      if (!status.ok()) break;
      entry.caller.admin = role == "admin";
      entry.caller.abort_any = entry.caller.admin;
      entry.caller.acts_for_others = role == "gateway";
      entry.digest = Sha256(token);
      for (size_t j = 0; j < entries.size(); ++j) {
        if (entries[j].digest == entry.digest) {
          status = yaml::Invalid(fields.PathOf("token"),
                                 absl::StrCat("the same as tokens[", j, "].token"));
        }
      }
      entries.push_back(std::move(entry));
    }
  } catch (const YAML::Exception& e) {
    status = yaml::YamlError(e.mark, e.msg);
  }
  if (!status.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": ", status.message()));
  }
  return entries;
}

absl::StatusOr<std::unique_ptr<TokenFile>> TokenFile::Load(const std::string& path) {
  std::unique_ptr<TokenFile> file(new TokenFile(path));
  absl::MutexLock lock(&file->mu_);
  file->MaybeReload();
  if (!file->last_error_.empty()) return absl::InvalidArgumentError(file->last_error_);
  return file;
}

void TokenFile::set_reload_interval(absl::Duration interval) {
  absl::MutexLock lock(&mu_);
  watch_.set_interval(interval);
}

void TokenFile::MaybeReload() {
  // A version that does not load is not read again until it changes again.
  if (!watch_.Changed()) return;
  std::string error;
  std::ifstream in(path_);
  if (!in.is_open()) {
    error = absl::StrCat("cannot read ", path_, ": ", std::strerror(errno));
  } else {
    std::stringstream text;
    text << in.rdbuf();
    if (!in) {
      error = absl::StrCat("cannot read ", path_);
    } else {
      absl::StatusOr<std::vector<Entry>> entries = Parse(path_, text.str());
      if (entries.ok()) {
        entries_ = *std::move(entries);
        last_error_.clear();
        if (loaded_) LogInfo(absl::StrCat(path_, " changed: ", entries_.size(), " token(s) now"));
        loaded_ = true;
        return;
      }
      error = std::string(entries.status().message());
    }
  }
  if (error != last_error_) {
    last_error_ = error;
    if (loaded_) LogError(absl::StrCat(error, "; the tokens loaded before stay in force"));
  }
}

absl::StatusOr<Caller> TokenFile::Find(absl::string_view token) {
  const std::string digest = Sha256(token);
  absl::MutexLock lock(&mu_);
  MaybeReload();
  // Every entry is compared, matching or not: the time taken says nothing.
  const Entry* found = nullptr;
  for (const Entry& entry : entries_) {
    if (SameSecret(entry.digest, digest)) found = &entry;
  }
  if (found == nullptr) return absl::NotFoundError("unknown or revoked token");
  return found->caller;
}

absl::StatusOr<Caller> TokenFile::FindIdentity(absl::string_view identity) {
  absl::MutexLock lock(&mu_);
  MaybeReload();
  for (const Entry& entry : entries_) {
    if (entry.caller.identity != identity) continue;
    // Its requests' standing, none of its other powers.
    Caller caller = entry.caller;
    caller.admin = false;
    caller.abort_any = false;
    caller.acts_for_others = false;
    return caller;
  }
  return absl::NotFoundError(
      absl::StrCat("no token of the tokens file stands for '", identity, "' (revoked?)"));
}

}  // namespace omnistage
