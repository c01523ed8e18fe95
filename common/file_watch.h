// FileWatch: tells whether files changed since they were last looked at, for
// files a running server re-reads (the tokens file, the gateway's certificate
// and key). It is polled where the files are used, at most once per interval
// (a stat per file), so it needs no thread and no inotify, and it sees the
// ways Kubernetes updates a mounted Secret (a symlink swapped to a new file:
// another inode) as well as edits in place (size, modification time).
//
//   FileWatch watch({"/tls/tls.crt", "/tls/tls.key"}, absl::Seconds(1));
//   if (watch.Changed()) ReloadFrom("/tls/tls.crt", "/tls/tls.key");
//
// A file that cannot be looked at (deleted, unreadable directory) counts as a
// version of its own: its disappearance is a change, and so is its return.
//
// Not thread-safe: its owner serializes calls (a mutex, or one thread).
#ifndef OMNISTAGE_COMMON_FILE_WATCH_H_
#define OMNISTAGE_COMMON_FILE_WATCH_H_

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <vector>

#include "absl/time/time.h"

namespace omnistage {

class FileWatch {
 public:
  FileWatch(std::vector<std::string> paths, absl::Duration interval);

  // Whether, looking now, a file differs from the previous look. The first
  // call looks and returns true. Within `interval` of the previous look it
  // returns false without looking.
  bool Changed();

  void set_interval(absl::Duration interval) { interval_ = interval; }
  const std::vector<std::string>& paths() const { return paths_; }

 private:
  // What tells versions of a file apart; all -1 when it cannot be looked at.
  struct Version {
    int64_t inode = -1;
    int64_t size = -1;
    int64_t modified_ns = -1;
    bool operator==(const Version& other) const {
      return inode == other.inode && size == other.size && modified_ns == other.modified_ns;
    }
  };
  static Version Look(const std::string& path);

  const std::vector<std::string> paths_;
  absl::Duration interval_;
  std::vector<Version> seen_;  // empty until the first look
  absl::Time looked_ = absl::InfinitePast();
};

}  // namespace omnistage

#endif  // OMNISTAGE_COMMON_FILE_WATCH_H_
