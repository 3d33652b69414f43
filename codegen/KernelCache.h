// The on-disk cache of compiled kernels (shared objects keyed by a content hash) and of opaque
// graph-level artifacts, with the process-wide table of loaded shared objects.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "codegen/Toolchain.h"

namespace kiln::codegen {

struct CompiledKernel {
  std::string path; // the shared object in the cache
  void* entry; // the address of the entry symbol in the loaded shared object
  bool cacheHit; // loaded from the cache (memory or disk) without compiling
};

struct CacheInfo {
  std::string dir;
  int64_t kernels; // shared objects
  int64_t artifacts;
  int64_t bytes; // every file of the cache, kept sources included
};

// Layout: <dir>/kernels/<key>.so with the source <key>.cpp next to it, <dir>/artifacts/<hash>.bin.
// Every file is written to a temporary name in the same folder and renamed into place, so
// readers (other processes included) see a complete file or none. The folders are created
// with mode 0700 and refused when another user owns them or others may write them: the cache
// holds code that kiln loads into the process.
class KernelCache {
public:
  // `dir` empty means $KILN_CACHE_DIR, else ~/.cache/kiln.
  explicit KernelCache(std::string dir = "", Toolchain toolchain = Toolchain());

  static std::string defaultDir();
  const std::string& dir() const { return dir_; }
  const Toolchain& toolchain() const { return toolchain_; }

  // The hex SHA-256 of the source, the compiler's identity and flags, kiln's version and the
  // CPU's features: everything the compiled code depends on.
  std::string kernelKey(std::string_view source) const;
  // The hex SHA-256 of what every kernel depends on besides its source (the fields of
  // kernelKey but the source): a graph-level artifact naming a compiled kernel is valid only
  // under the same toolchain key.
  // The compiler's identity comes from compilerIdentity().
  std::string toolchainKey() const;
  // The toolchain's identity (Toolchain::identity, the `--version` output), remembered in the
  // cache for the compiler's executable (its resolved path, size, modification and change
  // times): running the compiler costs milliseconds that a process whose graphs all come
  // from the cache should not pay. A wrapper script (ccache) hides an upgrade of the compiler
  // behind it; its cached kernels stay usable, they are just not rebuilt by the new compiler.
  std::string compilerIdentity() const;
  std::string kernelPath(const std::string& key) const;
  std::string sourcePath(const std::string& key) const;

  // The compiled and loaded `source`, and its symbol `entry`: from the process's loaded
  // libraries, else from the disk cache, else compiled now (CompileError on failure). A cache
  // file that is truncated, fails to load or lacks the symbol is removed and rebuilt.
  CompiledKernel compile(std::string_view source, const std::string& entry = "kiln_entry");

  // The symbol `entry` of the shared object at `path`, loaded once per process; an Error when
  // the file is not a complete shared object, cannot be loaded or lacks the symbol.
  static void* load(const std::string& path, const std::string& entry);

  // Stores `bytes` under `key` (any string: the caller's description of what was computed,
  // such as a graph's text and its inputs' metadata); kiln's version is part of the address.
  void putArtifact(std::string_view key, std::string_view bytes) const;
  // The bytes stored under `key`, or nothing; an entry failing its checksum is removed.
  std::optional<std::string> getArtifact(std::string_view key) const;
  std::string artifactPath(std::string_view key) const;

  CacheInfo info() const;
  // Removes every kernel and artifact file. Libraries already loaded stay loaded (their code
  // may be running); the process forgets them, so a later compile checks the disk again.
  void clear();

  // kiln's version, as compiled in.
  static const char* kilnVersion();

private:
  std::string subdir(const char* name) const;

  std::string dir_;
  Toolchain toolchain_;
};

} // namespace kiln::codegen
