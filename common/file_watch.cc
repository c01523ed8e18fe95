#include "common/file_watch.h"

#include <sys/stat.h>

#include <utility>

#include "absl/time/clock.h"

namespace omnistage {

FileWatch::FileWatch(std::vector<std::string> paths, absl::Duration interval)
    : paths_(std::move(paths)), interval_(interval) {}

FileWatch::Version FileWatch::Look(const std::string& path) {
  struct stat info {};
  if (stat(path.c_str(), &info) != 0) return Version{};
  return {static_cast<int64_t>(info.st_ino), static_cast<int64_t>(info.st_size),
          int64_t{info.st_mtim.tv_sec} * 1000000000 + info.st_mtim.tv_nsec};
}

bool FileWatch::Changed() {
  const absl::Time now = absl::Now();
  if (!seen_.empty() && now - looked_ < interval_) return false;
  looked_ = now;
  std::vector<Version> versions;
  versions.reserve(paths_.size());
  for (const std::string& path : paths_) versions.push_back(Look(path));
  if (!seen_.empty() && versions == seen_) return false;
  seen_ = std::move(versions);
  return true;
}

}  // namespace omnistage
