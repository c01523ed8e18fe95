#include "common/flags_usage.h"

#include <algorithm>
#include <cstdlib>
#include <iterator>
#include <iostream>

#include "absl/flags/commandlineflag.h"
#include "absl/flags/parse.h"
#include "absl/flags/reflection.h"
#include "absl/flags/usage.h"
#include "absl/flags/usage_config.h"
#include "absl/strings/match.h"

namespace omnistage {

void SetUsage(const std::string& usage, const std::string& flags_file,
              const std::vector<std::string>& shared_files) {
  absl::SetProgramUsageMessage(usage);
  absl::FlagsUsageConfig config;
  auto ours = [flags_file, shared_files](absl::string_view file) {
    if (absl::EndsWith(file, flags_file)) return true;
    for (const std::string& shared : shared_files) {
      if (absl::EndsWith(file, shared)) return true;
    }
    return false;
  };
  config.contains_help_flags = ours;
  config.contains_helpshort_flags = ours;
  absl::SetFlagsUsageConfig(config);
}

std::vector<char*> ParseFlagsOrExit(int argc, char** argv, const std::string& program) {
  // Abseil's parsing flags (--flagfile, --undefok, ...) are registered like
  // ours; its usage flags are not, and it handles them itself.
  static const char* const kUsageFlags[] = {"help",     "helpfull",  "helpshort", "helppackage",
                                            "helpon",   "helpmatch", "version",
                                            "only_check_args"};
  for (int i = 1; i < argc; ++i) {
    absl::string_view arg = argv[i];
    if (arg == "--") break;
    if (!absl::StartsWith(arg, "-") || arg == "-") continue;
    arg.remove_prefix(absl::StartsWith(arg, "--") ? 2 : 1);
    const size_t eq = arg.find('=');
    const absl::string_view name = arg.substr(0, eq);
    if (std::find(std::begin(kUsageFlags), std::end(kUsageFlags), name) !=
        std::end(kUsageFlags)) {
      continue;
    }
    absl::CommandLineFlag* flag = absl::FindCommandLineFlag(name);
    if (flag == nullptr && absl::StartsWith(name, "no")) {
      flag = absl::FindCommandLineFlag(name.substr(2));  // --noflag for booleans.
    }
    if (flag == nullptr) {
      std::cerr << program << ": unknown flag --" << name << " (see --help)\n";
      std::exit(2);
    }
    if (eq != absl::string_view::npos) {
      std::string error;
      if (!flag->ParseFrom(arg.substr(eq + 1), &error)) {
        std::cerr << program << ": --" << name << ": " << error << "\n";
        std::exit(2);
      }
    }
  }
  return absl::ParseCommandLine(argc, argv);
}

}  // namespace omnistage
