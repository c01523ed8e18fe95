// The replay driver: runs a libFuzzer target without libFuzzer.
//
// gcc cannot build libFuzzer binaries, so under the default build every fuzz
// target links this main() instead (see fuzz/BUILD). It runs the target on
// every input it is given (files, or the files of directories), then on
// --mutations deterministic pseudo-random mutations of them (seeded by --seed,
// default 1: the same run every time), and exits 0 if nothing crashed. A target
// checks its properties with FUZZ_CHECK, which aborts, so a broken property
// fails the test that runs this driver, naming the input:
//
//   pipeline_core_fuzzer --mutations=2000 fuzz/corpus/pipeline_core_fuzzer/*
//   pipeline_core_fuzzer crash-1234abcd          # replays one input
//
// Flags libFuzzer would take (-runs=..., a single dash) are ignored, so the
// same command line works for both builds. When an input crashes, the driver
// writes it to crash-replay-input (in $TEST_UNDECLARED_OUTPUTS_DIR under
// `bazel test`, else the working directory), to be replayed as a file, and
// kept in the corpus once fixed.
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);
extern "C" int LLVMFuzzerInitialize(int* argc, char*** argv) __attribute__((weak));

namespace {

struct Input {
  std::string name;
  std::string bytes;
};

bool ReadFile(const std::string& path, std::string* out) {
  std::ifstream file(path, std::ios::binary);
  if (!file) return false;
  out->assign(std::istreambuf_iterator<char>(file), std::istreambuf_iterator<char>());
  return true;
}

// Adds the file at `path`, or each regular file of the directory at `path`.
bool AddInputs(const std::string& path, std::vector<Input>* inputs) {
  struct stat info;
  if (stat(path.c_str(), &info) != 0) return false;
  if (!S_ISDIR(info.st_mode)) {
    Input input{path, ""};
    if (!ReadFile(path, &input.bytes)) return false;
    inputs->push_back(std::move(input));
    return true;
  }
  DIR* dir = opendir(path.c_str());
  if (dir == nullptr) return false;
  std::vector<std::string> names;
  while (dirent* entry = readdir(dir)) {
    if (entry->d_name[0] != '.') names.push_back(entry->d_name);
  }
  closedir(dir);
  std::sort(names.begin(), names.end());  // readdir's order is the file system's.
  for (const std::string& name : names) {
    if (!AddInputs(path + "/" + name, inputs)) return false;
  }
  return true;
}

// splitmix64: small, fast and the same everywhere.
class Random {
 public:
  explicit Random(uint64_t seed) : state_(seed) {}
  uint64_t Next() {
    uint64_t z = (state_ += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }
  size_t Below(size_t n) { return n == 0 ? 0 : Next() % n; }

 private:
  uint64_t state_;
};

// One to four of the mutations libFuzzer starts with: flip a bit, set a byte to
// a random or an interesting value, insert or erase bytes, copy a run within
// the input, or splice in a piece of another input.
std::string Mutate(const std::vector<Input>& inputs, const std::string& base, size_t max_len,
                   Random& random) {
  static const uint8_t kInteresting[] = {0, 1, 2, 0x7f, 0x80, 0xff, 0xfe, '\n', ':', '-'};
  std::string out = base;
  const size_t count = 1 + random.Below(4);
  for (size_t i = 0; i < count; ++i) {
    const size_t pos = random.Below(out.size() + 1);
    switch (random.Below(7)) {
      case 0:
        if (pos < out.size()) out[pos] ^= static_cast<char>(1u << random.Below(8));
        break;
      case 1:
        if (pos < out.size()) out[pos] = static_cast<char>(random.Next());
        break;
      case 2:
        if (pos < out.size()) {
          out[pos] = static_cast<char>(kInteresting[random.Below(sizeof(kInteresting))]);
        }
        break;
      case 3:
        out.insert(pos, 1 + random.Below(4), static_cast<char>(random.Next()));
        break;
      case 4:
        out.erase(pos, 1 + random.Below(8));
        break;
      case 5: {
        if (out.empty()) break;
        const size_t from = random.Below(out.size());
        const std::string run = out.substr(from, 1 + random.Below(16));
        out.insert(pos, run);
        break;
      }
      case 6: {
        const std::string& other = inputs[random.Below(inputs.size())].bytes;
        if (other.empty()) break;
        const size_t from = random.Below(other.size());
        out.insert(pos, other.substr(from, 1 + random.Below(64)));
        break;
      }
    }
  }
  if (out.size() > max_len) out.resize(max_len);
  return out;
}

// The input running now, for the crash handler.
const std::vector<uint8_t>* current = nullptr;
std::string crash_path;

void WriteAll(int fd, const void* data, size_t size) {
  const char* p = static_cast<const char*>(data);
  while (size > 0) {
    const ssize_t n = write(fd, p, size);
    if (n <= 0) return;
    p += n;
    size -= static_cast<size_t>(n);
  }
}

// Async-signal-safe: saves the input that crashed, then dies of the signal.
void OnCrash(int signal) {
  if (current != nullptr) {
    const int fd = open(crash_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd >= 0) {
      WriteAll(fd, current->data(), current->size());
      close(fd);
      const char note[] = "replay: the crashing input was saved to ";
      WriteAll(2, note, sizeof(note) - 1);
      WriteAll(2, crash_path.data(), crash_path.size());
      WriteAll(2, "\n", 1);
    }
  }
  ::signal(signal, SIG_DFL);
  raise(signal);
}

void Run(const std::string& bytes) {
  // A copy of its own, so that reading past the end is an error ASan can see.
  std::vector<uint8_t> copy(bytes.begin(), bytes.end());
  current = &copy;
  LLVMFuzzerTestOneInput(copy.data(), copy.size());
  current = nullptr;
}

bool ParseFlag(const char* arg, const char* name, uint64_t* value) {
  const size_t n = std::strlen(name);
  if (std::strncmp(arg, name, n) != 0 || arg[n] != '=') return false;
  *value = std::strtoull(arg + n + 1, nullptr, 10);
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  if (LLVMFuzzerInitialize != nullptr) LLVMFuzzerInitialize(&argc, &argv);
  uint64_t mutations = 0;
  uint64_t seed = 1;
  uint64_t max_len = 4096;
  std::vector<Input> inputs;
  for (int i = 1; i < argc; ++i) {
    const char* arg = argv[i];
    if (ParseFlag(arg, "--mutations", &mutations) || ParseFlag(arg, "--seed", &seed) ||
        ParseFlag(arg, "--max_len", &max_len)) {
      continue;
    }
    if (arg[0] == '-') continue;  // A libFuzzer flag.
    if (!AddInputs(arg, &inputs)) {
      std::fprintf(stderr, "replay: cannot read '%s'\n", arg);
      return 2;
    }
  }
  if (inputs.empty()) {
    std::fprintf(stderr,
                 "usage: %s [--mutations=N] [--seed=S] [--max_len=N] FILE_OR_DIR...\n"
                 "(no inputs given: a replay of nothing would test nothing)\n",
                 argv[0]);
    return 2;
  }
  const char* outputs = std::getenv("TEST_UNDECLARED_OUTPUTS_DIR");
  crash_path = std::string(outputs != nullptr ? outputs : ".") + "/crash-replay-input";
  for (int signal : {SIGABRT, SIGSEGV, SIGBUS, SIGFPE, SIGILL}) ::signal(signal, OnCrash);
  const auto start = std::chrono::steady_clock::now();
  for (const Input& input : inputs) {
    std::fprintf(stderr, "replay: %s\n", input.name.c_str());
    Run(input.bytes);
  }
  Random random(seed);
  for (uint64_t i = 0; i < mutations; ++i) {
    const Input& base = inputs[random.Below(inputs.size())];
    const std::string mutated = Mutate(inputs, base.bytes, max_len, random);
    Run(mutated);
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::fprintf(stderr, "replay: %zu inputs and %llu mutations (seed %llu) passed in %.2f s\n",
               inputs.size(), static_cast<unsigned long long>(mutations),
               static_cast<unsigned long long>(seed), seconds);
  return 0;
}
