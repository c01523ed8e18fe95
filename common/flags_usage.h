// Makes a binary's --help list its own flags. Abseil's --help shows only flags
// defined in a file named after the program (orchestrator.cc, main.cc of a
// program called main); ours live in <package>/main.cc or omni_cli.cc, so
// without this --help says "No flags matched".
//
//   int main(int argc, char** argv) {
//     SetUsage("Serves an omnistage pipeline over gRPC.", "orchestrator/main.cc");
//     absl::ParseCommandLine(argc, argv);
//   }
#ifndef OMNISTAGE_COMMON_FLAGS_USAGE_H_
#define OMNISTAGE_COMMON_FLAGS_USAGE_H_

#include <string>
#include <vector>

namespace omnistage {

// `usage` heads --help; the flags of `flags_file` (its path in the repository)
// and of `shared_files` (flags several binaries take, e.g.
// common/tracing/tracing_flags.cc) are the ones --help and --helpshort list
// (--helpfull lists all, gRPC's and Abseil's too). Call once, before parsing.
void SetUsage(const std::string& usage, const std::string& flags_file,
              const std::vector<std::string>& shared_files = {});

// absl::ParseCommandLine, except that an unknown flag or a value a flag cannot
// take ends the program with exit code 2 (bad usage, as the docs promise; Abseil
// exits 1) and one line naming it: "<program>: unknown flag --colour (see --help)".
std::vector<char*> ParseFlagsOrExit(int argc, char** argv, const std::string& program);

}  // namespace omnistage

#endif  // OMNISTAGE_COMMON_FLAGS_USAGE_H_
