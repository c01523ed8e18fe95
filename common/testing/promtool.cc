#include "common/testing/promtool.h"

#include <stdio.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <fstream>

#include "absl/strings/str_cat.h"

namespace omnistage {

PromtoolResult PromtoolCheckMetrics(const std::string& text) {
  static std::atomic<int> next{0};
  const char* tmp = std::getenv("TEST_TMPDIR");
  const std::string path =
      absl::StrCat(tmp != nullptr ? tmp : "/tmp", "/metrics-", getpid(), "-", next++, ".txt");
  std::ofstream(path) << text;
  PromtoolResult result;
  FILE* pipe = popen(absl::StrCat("promtool check metrics < ", path, " 2>&1").c_str(), "r");
  if (pipe == nullptr) return result;
  char buffer[512];
  while (fgets(buffer, sizeof(buffer), pipe) != nullptr) result.output += buffer;
  const int status = pclose(pipe);
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  std::remove(path.c_str());
  return result;
}

}  // namespace omnistage
