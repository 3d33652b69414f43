// Runs the system C++ compiler (posix_spawn, output captured through a pipe) and describes the
// host (compiler identity, CPU features) for the kernel cache's keys.
#include "codegen/Toolchain.h"

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <mutex>
#include <sstream>
#include <thread>

#include "codegen/CppCodegen.h"

extern char** environ;

namespace kiln::codegen {

namespace {

struct ProcessResult {
  int exitCode; // the exit status, or 128 + the signal that ended the process
  std::string output; // stdout and stderr, interleaved as the process wrote them
};

// Runs argv[0] (searched in PATH) with stdout and stderr into one pipe; an Error when it cannot
// be started.
ProcessResult runProcess(const std::vector<std::string>& args) {
  int fds[2];
  KILN_CHECK(pipe2(fds, O_CLOEXEC) == 0, "kiln: pipe() failed: ", std::strerror(errno));
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, fds[1], STDOUT_FILENO);
  posix_spawn_file_actions_adddup2(&actions, fds[1], STDERR_FILENO);
  posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  std::vector<char*> argv;
  for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  pid_t pid = 0;
  int rc = posix_spawnp(&pid, argv[0], &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  close(fds[1]);
  if (rc != 0) {
    close(fds[0]);
    throw Error(strCat("kiln: cannot run '", args[0], "': ", std::strerror(rc)));
  }
  ProcessResult result{0, ""};
  char chunk[4096];
  for (;;) {
    ssize_t n = read(fds[0], chunk, sizeof chunk);
    if (n > 0) {
      result.output.append(chunk, size_t(n));
    } else if (n == 0 || errno != EINTR) {
      break;
    }
  }
  close(fds[0]);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0) {
    KILN_CHECK(errno == EINTR, "kiln: waitpid() failed: ", std::strerror(errno));
  }
  result.exitCode = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return result;
}

std::string commandLine(const std::vector<std::string>& args) {
  std::string line;
  for (const std::string& a : args) {
    if (!line.empty()) line += ' ';
    line += a;
  }
  return line;
}

std::string readCpuFlags() {
  std::ifstream cpuinfo("/proc/cpuinfo");
  std::string line;
  while (std::getline(cpuinfo, line)) {
    if (line.rfind("flags", 0) == 0) {
      size_t colon = line.find(':');
      if (colon != std::string::npos) return line.substr(colon + 1);
    }
  }
  std::string features;
#define KILN_CPU_FEATURE(name)                                                                     \
  if (__builtin_cpu_supports(name)) features += " " name;
  KILN_CPU_FEATURE("sse4.2")
  KILN_CPU_FEATURE("avx")
  KILN_CPU_FEATURE("avx2")
  KILN_CPU_FEATURE("fma")
  KILN_CPU_FEATURE("bmi2")
  KILN_CPU_FEATURE("avx512f")
  KILN_CPU_FEATURE("avx512bw")
  KILN_CPU_FEATURE("avx512vl")
  KILN_CPU_FEATURE("avx512dq")
#undef KILN_CPU_FEATURE
  return features;
}

} // namespace

CompileError::CompileError(const std::string& message, std::string sourcePath_,
                           std::string compilerOutput_)
    : Error(message), sourcePath(std::move(sourcePath_)), compilerOutput(std::move(compilerOutput_)) {}

Toolchain::Toolchain(std::string compiler, std::vector<std::string> extraFlags)
    : compiler_(std::move(compiler)), extraFlags_(std::move(extraFlags)) {
  if (compiler_.empty()) {
    const char* env = std::getenv("KILN_CXX");
    compiler_ = env && *env ? env : "c++";
  }
}

const std::vector<std::string>& Toolchain::baseFlags() {
  // -fno-math-errno and -fno-trapping-math change no value (generated code reads neither errno
  // nor the FP exception flags) but let GCC if-convert the prelude's branch-free math and inline
  // sqrt/floor/nearbyint, so loops calling them vectorize; -lmvec provides the vector variants
  // of the libm functions the prelude declares `simd`. -mprefer-vector-width=512 lets GCC use
  // AVX-512's full width where -march=native has it (math-heavy loops ~25% faster on this
  // Xeon; no effect elsewhere). -ffp-contract=off: eager kernels round every op, and a fused
  // x*y - x*y contracted into an FMA is not 0 (a variance over one element came out -inf).
  // -fno-tree-pre: GCC 12's partial redundancy elimination turns a select feeding a NaN test
  // (relu then max_pool's `v > best || v != v`) into selects of booleans that its vectorizer
  // cannot take, so the whole loop stayed scalar with unpredictable branches (relu + 2x2 max
  // pool on 32x16x64x64: 11.2 ms scalar, 0.38 ms vectorized; the bench suite otherwise unchanged).
  static const std::vector<std::string> flags = {
      "-O3",       "-march=native", "-mprefer-vector-width=512", "-fopenmp", "-fno-math-errno",
      "-fno-trapping-math", "-ffp-contract=off", "-fno-tree-pre", "-shared", "-fPIC", "-std=c++17",
      "-lmvec"};
  return flags;
}

std::vector<std::string> Toolchain::flags() const {
  std::vector<std::string> all = baseFlags();
  all.insert(all.end(), extraFlags_.begin(), extraFlags_.end());
  return all;
}

const std::string& Toolchain::identity() const {
  static std::mutex mutex;
  static std::map<std::string, std::string> identities;
  std::lock_guard<std::mutex> lock(mutex);
  auto it = identities.find(compiler_);
  if (it != identities.end()) return it->second;
  ProcessResult version = runProcess({compiler_, "--version"});
  KILN_CHECK(version.exitCode == 0, "kiln: '", compiler_,
             " --version' failed (the C++ compiler is $KILN_CXX or kiln.config.cpp_compiler):\n",
             version.output);
  return identities.emplace(compiler_, std::move(version.output)).first->second;
}

namespace {

std::string readFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

// The translation units of a source split by the code generator (CppOptions::translationUnits):
// each is the prelude (up to kEndOfPreludeMarker) followed by its part; empty when not split.
std::vector<std::string> translationUnits(const std::string& source) {
  std::string endOfPrelude = std::string(kEndOfPreludeMarker) + "\n";
  std::string marker = std::string("\n") + kTranslationUnitMarker + "\n";
  size_t preludeEnd = source.find(endOfPrelude);
  if (preludeEnd == std::string::npos || source.find(marker) == std::string::npos) return {};
  std::string prelude = source.substr(0, preludeEnd);
  std::vector<std::string> units;
  size_t begin = preludeEnd + endOfPrelude.size();
  for (;;) {
    size_t at = source.find(marker, begin);
    // Blank lines keep the line numbers of each part the source's (for diagnostics).
    std::string lines(size_t(std::count(source.begin() + std::ptrdiff_t(preludeEnd),
                                        source.begin() + std::ptrdiff_t(begin), '\n')),
                      '\n');
    units.push_back(prelude + lines + source.substr(begin, at == std::string::npos ? at : at - begin));
    if (at == std::string::npos) break;
    begin = at + marker.size();
  }
  return units;
}

} // namespace

void Toolchain::compileSharedObject(const std::string& sourcePath,
                                    const std::string& outputPath) const {
  std::vector<std::string> units = translationUnits(readFile(sourcePath));
  if (!units.empty()) {
    compileUnits(sourcePath, outputPath, units);
    return;
  }
  std::vector<std::string> args = {compiler_, sourcePath};
  for (const std::string& flag : flags()) args.push_back(flag);
  args.push_back("-o");
  args.push_back(outputPath);
  ProcessResult result = runProcess(args);
  if (result.exitCode != 0) {
    throw CompileError(strCat("kiln: C++ compilation failed (exit status ", result.exitCode,
                              ")\n  command: ", commandLine(args), "\n  source: ", sourcePath,
                              "\n", result.output),
                       sourcePath, result.output);
  }
}

void Toolchain::compileUnits(const std::string& sourcePath, const std::string& outputPath,
                             const std::vector<std::string>& units) const {
  // Each unit compiled to an object in parallel (a process each), then linked: g++'s time on a
  // program of thousands of ops divides by the cores it gets.
  std::vector<std::string> sources, objects;
  for (size_t k = 0; k < units.size(); ++k) {
    std::string base = strCat(outputPath, ".part", k);
    sources.push_back(base + ".cpp");
    objects.push_back(base + ".o");
    std::ofstream out(sources.back(), std::ios::binary);
    out << units[k];
    KILN_CHECK(out.good(), "kiln: cannot write ", sources.back());
  }
  auto cleanup = [&] {
    for (const std::string& f : sources) unlink(f.c_str());
    for (const std::string& f : objects) unlink(f.c_str());
  };
  std::vector<std::vector<std::string>> commands(units.size());
  std::vector<ProcessResult> results(units.size(), ProcessResult{0, ""});
  std::vector<std::string> failures(units.size());
  std::vector<std::thread> threads;
  for (size_t k = 0; k < units.size(); ++k) {
    commands[k] = {compiler_, sources[k], "-c"};
    for (const std::string& flag : flags()) commands[k].push_back(flag);
    commands[k].push_back("-o");
    commands[k].push_back(objects[k]);
    threads.emplace_back([&, k] {
      try {
        results[k] = runProcess(commands[k]);
      } catch (const std::exception& e) {
        failures[k] = e.what();
      }
    });
  }
  for (std::thread& t : threads) t.join();
  for (size_t k = 0; k < units.size(); ++k) {
    if (!failures[k].empty()) {
      cleanup();
      throw Error(failures[k]);
    }
    if (results[k].exitCode != 0) {
      cleanup();
      throw CompileError(strCat("kiln: C++ compilation failed (exit status ", results[k].exitCode,
                                ")\n  command: ", commandLine(commands[k]), "\n  source: ", sourcePath,
                                " (part ", k + 1, " of ", units.size(), ")\n", results[k].output),
                         sourcePath, results[k].output);
    }
  }
  std::vector<std::string> link = {compiler_};
  link.insert(link.end(), objects.begin(), objects.end());
  for (const std::string& flag : flags()) link.push_back(flag);
  link.push_back("-o");
  link.push_back(outputPath);
  ProcessResult linked = runProcess(link);
  cleanup();
  if (linked.exitCode != 0)
    throw CompileError(strCat("kiln: linking the compiled kernels failed (exit status ", linked.exitCode,
                              ")\n  command: ", commandLine(link), "\n  source: ", sourcePath, "\n",
                              linked.output),
                       sourcePath, linked.output);
}

const std::string& hostCpuFeatures() {
  static const std::string features = readCpuFlags();
  return features;
}

} // namespace kiln::codegen
