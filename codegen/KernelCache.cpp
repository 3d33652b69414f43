// Kernel cache: content-addressed shared objects and artifacts on disk, atomic writes, checks
// that find damaged entries, and the process-wide table of loaded libraries.
#include "codegen/KernelCache.h"

#include <cstdint>
#include <dlfcn.h>
#include <elf.h>
#include <fcntl.h>
#include <link.h>
#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <mutex>
#include <vector>

#include "codegen/Sha256.h"

#ifndef KILN_VERSION
#error "KILN_VERSION must be defined by the build (codegen/CMakeLists.txt)"
#endif

namespace fs = std::filesystem;

namespace kiln::codegen {

namespace {

constexpr char kArtifactMagic[8] = {'K', 'I', 'L', 'N', 'A', 'R', 'T', '1'};
constexpr size_t kArtifactHeaderSize = 8 + 8 + 32; // magic, payload size, payload SHA-256

// Guards the table of loaded libraries and serializes compiles within the process.
std::mutex& cacheMutex() {
  static std::mutex mutex;
  return mutex;
}

// Shared object path -> dlopen handle, for every library this process loaded through the cache.
std::map<std::string, void*>& loadedLibraries() {
  static std::map<std::string, void*> libraries;
  return libraries;
}

// Creates `path` and its missing parents with mode 0700, then refuses a folder that is not
// ours alone to write: code loaded from it runs in this process.
void ensurePrivateDir(const std::string& path) {
  std::string prefix;
  size_t pos = 0;
  while (pos != std::string::npos) {
    pos = path.find('/', pos + 1);
    prefix = path.substr(0, pos);
    if (prefix.empty()) continue;
    if (mkdir(prefix.c_str(), 0700) == 0) {
      chmod(prefix.c_str(), 0700); // exactly 0700 whatever the umask
    } else {
      KILN_CHECK(errno == EEXIST, "kiln: cannot create the cache folder ", prefix, ": ",
                 std::strerror(errno));
    }
  }
  struct stat st;
  KILN_CHECK(stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode), "kiln: the cache folder ", path,
             " is not a folder");
  KILN_CHECK(st.st_uid == geteuid() && (st.st_mode & 022) == 0, "kiln: refusing the cache folder ",
             path, ": it must be owned by this user and not writable by others (chmod 700 it, or "
             "set KILN_CACHE_DIR / kiln.config.cache_dir to another folder)");
}

std::string tempPathFor(const std::string& path) {
  static std::atomic<uint64_t> counter{0};
  return strCat(path, ".tmp.", getpid(), ".", counter++);
}

// Writes `bytes` to a temporary file next to `path` and renames it into place.
void writeFileAtomically(const std::string& path, std::string_view header, std::string_view bytes) {
  std::string temp = tempPathFor(path);
  int fd = open(temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  KILN_CHECK(fd >= 0, "kiln: cannot write ", temp, ": ", std::strerror(errno));
  bool ok = true;
  for (std::string_view part : {header, bytes}) {
    while (ok && !part.empty()) {
      ssize_t n = write(fd, part.data(), part.size());
      if (n > 0) {
        part.remove_prefix(size_t(n));
      } else if (n < 0 && errno != EINTR) {
        ok = false;
      }
    }
  }
  int writeErrno = errno;
  ok = close(fd) == 0 && ok;
  if (ok && rename(temp.c_str(), path.c_str()) == 0) return;
  int error = ok ? errno : writeErrno;
  unlink(temp.c_str());
  throw Error(strCat("kiln: cannot write ", path, ": ", std::strerror(error)));
}

std::optional<std::string> readFile(const std::string& path) {
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return std::nullopt;
  std::string bytes;
  char chunk[65536];
  for (;;) {
    ssize_t n = read(fd, chunk, sizeof chunk);
    if (n > 0) {
      bytes.append(chunk, size_t(n));
    } else if (n == 0 || errno != EINTR) {
      break;
    }
  }
  close(fd);
  return bytes;
}

// Why the file at `path` is not a complete shared object for this machine, or "" when it is.
// dlopen of a truncated library can succeed and fault later, so sizes are checked first: every
// segment and the section header table (which the linker writes last) must lie in the file.
std::string sharedObjectProblem(const std::string& path) {
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return strCat("cannot open: ", std::strerror(errno));
  struct stat st;
  ElfW(Ehdr) header;
  std::string problem;
  if (fstat(fd, &st) != 0 || pread(fd, &header, sizeof header, 0) != ssize_t(sizeof header)) {
    problem = "shorter than an ELF header";
  } else if (std::memcmp(header.e_ident, ELFMAG, SELFMAG) != 0 ||
             header.e_ident[EI_CLASS] != (sizeof(void*) == 8 ? ELFCLASS64 : ELFCLASS32) ||
             header.e_type != ET_DYN) {
    problem = "not a shared object of this machine";
  } else {
    uint64_t size = uint64_t(st.st_size);
    uint64_t sectionEnd = uint64_t(header.e_shoff) + uint64_t(header.e_shnum) * header.e_shentsize;
    uint64_t segmentsEnd = uint64_t(header.e_phoff) + uint64_t(header.e_phnum) * header.e_phentsize;
    if (sectionEnd > size || segmentsEnd > size || header.e_phentsize != sizeof(ElfW(Phdr))) {
      problem = "truncated (its headers lie past the end of the file)";
    }
    for (int i = 0; problem.empty() && i < header.e_phnum; ++i) {
      ElfW(Phdr) segment;
      if (pread(fd, &segment, sizeof segment, off_t(header.e_phoff + i * sizeof segment)) !=
              ssize_t(sizeof segment) ||
          uint64_t(segment.p_offset) + segment.p_filesz > size) {
        problem = "truncated (a segment lies past the end of the file)";
      }
    }
  }
  close(fd);
  return problem;
}

// The resolved path of the program `name` as posix_spawnp finds it (PATH searched when it has
// no '/'), or "" when there is none.
std::string executablePath(const std::string& name) {
  std::vector<std::string> candidates;
  if (name.find('/') != std::string::npos) {
    candidates.push_back(name);
  } else if (const char* path = std::getenv("PATH")) {
    std::string dirs = path;
    for (size_t pos = 0; pos <= dirs.size();) {
      size_t colon = std::min(dirs.find(':', pos), dirs.size());
      std::string dir = dirs.substr(pos, colon - pos);
      candidates.push_back((dir.empty() ? std::string(".") : dir) + "/" + name);
      pos = colon + 1;
    }
  }
  for (const std::string& c : candidates) {
    if (access(c.c_str(), X_OK) != 0) continue;
    char* real = realpath(c.c_str(), nullptr);
    if (real == nullptr) continue;
    std::string resolved = real;
    std::free(real);
    return resolved;
  }
  return "";
}

struct OpenedLibrary {
  void* handle = nullptr;
  void* entry = nullptr;
  std::string problem; // why it could not be used, when entry is null
};

// Checks and loads the library at `path` and finds `entry`; the caller holds cacheMutex().
OpenedLibrary openLibrary(const std::string& path, const std::string& entry) {
  OpenedLibrary lib;
  auto loaded = loadedLibraries().find(path);
  if (loaded != loadedLibraries().end()) {
    lib.handle = loaded->second;
  } else {
    lib.problem = sharedObjectProblem(path);
    if (!lib.problem.empty()) return lib;
    lib.handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (lib.handle == nullptr) {
      const char* error = dlerror();
      lib.problem = strCat("dlopen failed: ", error ? error : "unknown error");
      return lib;
    }
  }
  dlerror();
  lib.entry = dlsym(lib.handle, entry.c_str());
  if (lib.entry == nullptr) {
    lib.problem = strCat("it defines no symbol '", entry, "'");
    if (loaded == loadedLibraries().end()) dlclose(lib.handle);
    lib.handle = nullptr;
    return lib;
  }
  loadedLibraries().emplace(path, lib.handle);
  return lib;
}

} // namespace

KernelCache::KernelCache(std::string dir, Toolchain toolchain)
    : dir_(dir.empty() ? defaultDir() : std::move(dir)), toolchain_(std::move(toolchain)) {
  while (dir_.size() > 1 && dir_.back() == '/') dir_.pop_back();
  if (!dir_.empty() && dir_[0] != '/') dir_ = fs::absolute(dir_).string();
}

std::string KernelCache::defaultDir() {
  if (const char* env = std::getenv("KILN_CACHE_DIR"); env && *env) return env;
  const char* home = std::getenv("HOME");
  if (!home || !*home) {
    const passwd* user = getpwuid(geteuid());
    KILN_CHECK(user && user->pw_dir, "kiln: no home folder for the kernel cache; set KILN_CACHE_DIR");
    home = user->pw_dir;
  }
  return strCat(home, "/.cache/kiln");
}

const char* KernelCache::kilnVersion() { return KILN_VERSION; }

std::string KernelCache::subdir(const char* name) const { return strCat(dir_, "/", name); }

std::string KernelCache::kernelKey(std::string_view source) const {
  Sha256 h;
  h.updateField("kiln-kernel-v1");
  h.updateField(kilnVersion());
  h.updateField(toolchain_.compiler());
  h.updateField(toolchain_.identity());
  for (const std::string& flag : toolchain_.flags()) h.updateField(flag);
  h.updateField(hostCpuFeatures());
  h.updateField(source);
  return h.hexDigest();
}

std::string KernelCache::compilerIdentity() const {
  std::string exe = executablePath(toolchain_.compiler());
  struct stat st;
  if (exe.empty() || stat(exe.c_str(), &st) != 0) return toolchain_.identity();
  std::string key = strCat("compiler-identity\n", exe, "\n", st.st_size, " ", st.st_mtim.tv_sec, ".",
                           st.st_mtim.tv_nsec, " ", st.st_ctim.tv_sec, ".", st.st_ctim.tv_nsec, " ",
                           st.st_ino);
  if (std::optional<std::string> known = getArtifact(key)) return *known;
  const std::string& identity = toolchain_.identity();
  try {
    putArtifact(key, identity);
  } catch (const Error&) {
    // An unwritable cache only means the next process runs the compiler again.
  }
  return identity;
}

std::string KernelCache::toolchainKey() const {
  Sha256 h;
  h.updateField("kiln-toolchain-v1");
  h.updateField(kilnVersion());
  h.updateField(toolchain_.compiler());
  h.updateField(compilerIdentity());
  for (const std::string& flag : toolchain_.flags()) h.updateField(flag);
  h.updateField(hostCpuFeatures());
  return h.hexDigest();
}

std::string KernelCache::kernelPath(const std::string& key) const {
  return strCat(subdir("kernels"), "/", key, ".so");
}

std::string KernelCache::sourcePath(const std::string& key) const {
  return strCat(subdir("kernels"), "/", key, ".cpp");
}

CompiledKernel KernelCache::compile(std::string_view source, const std::string& entry) {
  std::string key = kernelKey(source);
  std::string path = kernelPath(key);
  {
    std::lock_guard<std::mutex> lock(cacheMutex());
    if (loadedLibraries().count(path)) {
      OpenedLibrary lib = openLibrary(path, entry);
      KILN_CHECK(lib.entry, "kiln: the compiled kernel ", path, " is unusable: ", lib.problem);
      return {path, lib.entry, true};
    }
    ensurePrivateDir(dir_);
    ensurePrivateDir(subdir("kernels"));
    if (access(path.c_str(), F_OK) == 0) {
      OpenedLibrary lib = openLibrary(path, entry);
      if (lib.entry) return {path, lib.entry, true};
      unlink(path.c_str()); // damaged: rebuilt below
    }
  }
  // The compiler runs outside the lock, so threads compiling different programs (AOT autograd's
  // forward and backward) run their compilers at once; two compiling the same one each write a
  // temporary file and rename it into place, the same bytes either way.
  std::string src = sourcePath(key);
  writeFileAtomically(src, "", source);
  std::string temp = tempPathFor(path);
  try {
    toolchain_.compileSharedObject(src, temp);
  } catch (...) {
    unlink(temp.c_str());
    throw;
  }
  if (rename(temp.c_str(), path.c_str()) != 0) {
    int error = errno;
    unlink(temp.c_str());
    throw Error(strCat("kiln: cannot write ", path, ": ", std::strerror(error)));
  }
  std::lock_guard<std::mutex> lock(cacheMutex());
  OpenedLibrary lib = openLibrary(path, entry);
  KILN_CHECK(lib.entry, "kiln: the kernel compiled from ", src, " is unusable: ", lib.problem);
  return {path, lib.entry, false};
}

void* KernelCache::load(const std::string& path, const std::string& entry) {
  std::lock_guard<std::mutex> lock(cacheMutex());
  OpenedLibrary lib = openLibrary(path, entry);
  KILN_CHECK(lib.entry, "kiln: cannot load '", entry, "' from ", path, ": ", lib.problem);
  return lib.entry;
}

std::string KernelCache::artifactPath(std::string_view key) const {
  Sha256 h;
  h.updateField("kiln-artifact-v1");
  h.updateField(kilnVersion());
  h.updateField(key);
  return strCat(subdir("artifacts"), "/", h.hexDigest(), ".bin");
}

void KernelCache::putArtifact(std::string_view key, std::string_view bytes) const {
  ensurePrivateDir(dir_);
  ensurePrivateDir(subdir("artifacts"));
  std::string header(kArtifactMagic, sizeof kArtifactMagic);
  uint64_t size = bytes.size();
  for (int i = 0; i < 8; ++i) header += char(size >> (8 * i));
  Sha256 h;
  h.update(bytes);
  for (uint8_t byte : h.digest()) header += char(byte);
  writeFileAtomically(artifactPath(key), header, bytes);
}

std::optional<std::string> KernelCache::getArtifact(std::string_view key) const {
  std::string path = artifactPath(key);
  std::optional<std::string> file = readFile(path);
  if (!file) return std::nullopt;
  bool valid = file->size() >= kArtifactHeaderSize &&
               std::memcmp(file->data(), kArtifactMagic, sizeof kArtifactMagic) == 0;
  if (valid) {
    uint64_t size = 0;
    for (int i = 0; i < 8; ++i) size |= uint64_t(uint8_t((*file)[8 + i])) << (8 * i);
    std::string_view payload = std::string_view(*file).substr(kArtifactHeaderSize);
    Sha256 h;
    h.update(payload);
    auto digest = h.digest();
    valid = payload.size() == size && std::memcmp(digest.data(), file->data() + 16, 32) == 0;
  }
  if (!valid) {
    unlink(path.c_str());
    return std::nullopt;
  }
  return file->substr(kArtifactHeaderSize);
}

CacheInfo KernelCache::info() const {
  CacheInfo info{dir_, 0, 0, 0};
  for (const char* name : {"kernels", "artifacts"}) {
    std::error_code ec;
    for (const fs::directory_entry& e : fs::directory_iterator(subdir(name), ec)) {
      std::error_code fileEc;
      if (!e.is_regular_file(fileEc)) continue;
      uintmax_t size = e.file_size(fileEc);
      if (!fileEc) info.bytes += int64_t(size);
      std::string ext = e.path().extension().string();
      if (ext == ".so") ++info.kernels;
      if (ext == ".bin") ++info.artifacts;
    }
  }
  return info;
}

void KernelCache::clear() {
  std::lock_guard<std::mutex> lock(cacheMutex());
  for (const char* name : {"kernels", "artifacts"}) {
    std::error_code ec;
    for (const fs::directory_entry& e : fs::directory_iterator(subdir(name), ec)) {
      std::error_code fileEc;
      if (e.is_regular_file(fileEc)) fs::remove(e.path(), fileEc);
    }
  }
  std::string prefix = subdir("kernels") + "/";
  std::erase_if(loadedLibraries(), [&](const auto& item) { return item.first.rfind(prefix, 0) == 0; });
}

} // namespace kiln::codegen
