// The system C++ compiler as kiln uses it: generated C++17 source -> a shared object.
#pragma once
#include <string>
#include <vector>

#include "runtime/Error.h"

namespace kiln::codegen {

// A failed compilation (RuntimeError in Python): the message has the command, the path of the
// source file (kept for the user to read) and the compiler's own diagnostics.
struct CompileError : Error {
  CompileError(const std::string& message, std::string sourcePath, std::string compilerOutput);
  std::string sourcePath;
  std::string compilerOutput;
};

class Toolchain {
public:
  // `compiler` is one program name or path; empty means $KILN_CXX, else "c++". `extraFlags`
  // come after the base flags, so they can override them (-O1) or add libraries (-lopenblas).
  explicit Toolchain(std::string compiler = "", std::vector<std::string> extraFlags = {});

  // -O3 -march=native -fopenmp -shared -fPIC -std=c++17.
  static const std::vector<std::string>& baseFlags();
  const std::string& compiler() const { return compiler_; }
  // The base flags followed by the extra flags.
  std::vector<std::string> flags() const;
  // The compiler's `--version` output, run once per process for each compiler: a compiler
  // upgrade changes it and so every cache key.
  const std::string& identity() const;
  // Compiles the C++ file `sourcePath` into the shared object `outputPath`; a CompileError
  // when the compiler fails, an Error when it cannot be run at all. A source the code generator
  // split into translation units (kTranslationUnitMarker) is compiled a unit per process, in
  // parallel, and linked.
  void compileSharedObject(const std::string& sourcePath, const std::string& outputPath) const;

private:
  // A source split into translation units by the code generator: each compiled in parallel,
  // then linked.
  void compileUnits(const std::string& sourcePath, const std::string& outputPath,
                    const std::vector<std::string>& units) const;

  std::string compiler_;
  std::vector<std::string> extraFlags_;
};

// This CPU's instruction-set features (the `flags` of /proc/cpuinfo, else what
// __builtin_cpu_supports reports), read once per process: -march=native code built for one
// CPU must not be loaded on another.
const std::string& hostCpuFeatures();

} // namespace kiln::codegen
