// TokenFile: the bearer tokens an orchestrator accepts (--tokens_file), each
// mapped to an identity and a role, re-read when the file changes (a Kubernetes
// Secret updated in place, a token revoked by deleting its entry).
//
//   tokens:
//     - identity: alice          # who the caller is: owns the requests it starts
//       role: user               # user: Generate and Abort its own requests
//       token: "<16+ characters>"
//     - identity: ops
//       role: admin              # admin: also status and stage utilities
//       token: "<16+ characters>"
//     - identity: batch-gateway
//       role: gateway            # gateway: also runs requests as another
//                                #   identity (GenerateRequest.on_behalf_of)
//       token: "<16+ characters>"
//       priority: 5              # optional: its requests' default priority (0..9,
//       max_priority: 7          #   default 0) and the most they may ask (default:
//       weight: 3                #   priority), its share when queued (default 1)
//
// Only SHA-256 digests of the tokens are kept in memory, and a presented token
// is compared with every entry's digest in constant time.
//
// Thread-safe: Find() may be called from any thread.
#ifndef OMNISTAGE_ORCHESTRATOR_SERVICE_TOKEN_FILE_H_
#define OMNISTAGE_ORCHESTRATOR_SERVICE_TOKEN_FILE_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/file_watch.h"
#include "orchestrator/core/caller.h"

namespace omnistage {

class TokenFile {
 public:
  // Tokens shorter than this are refused: they could be guessed.
  static constexpr size_t kMinTokenLength = 16;
  // An identity's weight in the admission queue lies in [1, kMaxWeight].
  static constexpr int64_t kMaxWeight = 1000;

  // Reads `path`. INVALID_ARGUMENT naming the file and the field
  // ("tokens[1].role: expected user or admin, got 'root'").
  static absl::StatusOr<std::unique_ptr<TokenFile>> Load(const std::string& path);

  // The caller `token` stands for; NOT_FOUND when no entry has it. Looks at
  // the file first if `reload_interval` passed since it last did, and reads it
  // again if it changed; a changed file that does not load is logged and the
  // tokens it had stay in force.
  absl::StatusOr<Caller> Find(absl::string_view token) ABSL_LOCKS_EXCLUDED(mu_);

  // How `identity`'s requests stand (priorities, weight, rates, objectives:
  // its first entry's), for a request run on its behalf; none of the
  // entry's other powers (admin, acting for others). NOT_FOUND when no
  // entry names it. Reloads as Find().
  absl::StatusOr<Caller> FindIdentity(absl::string_view identity) ABSL_LOCKS_EXCLUDED(mu_);

  // How often Find() looks for changes (1 s; tests set zero).
  void set_reload_interval(absl::Duration interval) ABSL_LOCKS_EXCLUDED(mu_);
  const std::string& path() const { return path_; }

 private:
  struct Entry {
    std::string digest;  // SHA-256 of the token
    Caller caller;
  };
  explicit TokenFile(std::string path) : path_(path), watch_({std::move(path)}, absl::Seconds(1)) {}
  // Parses the file's text into entries.
  static absl::StatusOr<std::vector<Entry>> Parse(const std::string& path,
                                                  const std::string& text);
  void MaybeReload() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const std::string path_;
  absl::Mutex mu_;
  std::vector<Entry> entries_ ABSL_GUARDED_BY(mu_);
  FileWatch watch_ ABSL_GUARDED_BY(mu_);
  // Whether a version of the file ever loaded.
  bool loaded_ ABSL_GUARDED_BY(mu_) = false;
  // The last error reading the file, so a broken file is reported once.
  std::string last_error_ ABSL_GUARDED_BY(mu_);
};

}  // namespace omnistage

#endif  // OMNISTAGE_ORCHESTRATOR_SERVICE_TOKEN_FILE_H_
