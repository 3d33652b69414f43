// kiln._C._codegen: compile_source/load over codegen::KernelCache, configured by kiln.config
// (cpp_compiler, cpp_flags, cache_dir), read at every call so assignments take effect at once.
#include "frontend/binding/KernelCacheBinding.h"

#include <cstdint>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include "codegen/KernelCache.h"

namespace nb = nanobind;

namespace kiln::python {

namespace {

// A loaded entry symbol: its address (for ctypes or generated wrappers) and where it came from.
struct KernelHandle {
  std::string path;
  std::string entry;
  uintptr_t address;
};

nb::object configValue(const char* name) {
  nb::object config = nb::module_::import_("kiln.config");
  return nb::hasattr(config, name) ? config.attr(name) : nb::none();
}

std::string configString(const char* name) {
  nb::object value = configValue(name);
  if (value.is_none()) return "";
  if (!nb::isinstance<nb::str>(value)) {
    throw nb::type_error(("kiln.config." + std::string(name) + " must be a str or None").c_str());
  }
  return nb::cast<std::string>(value);
}

std::vector<std::string> configFlags() {
  nb::object value = configValue("cpp_flags");
  if (value.is_none()) return {};
  if (nb::isinstance<nb::str>(value)) {
    throw nb::type_error("kiln.config.cpp_flags must be a list of str, not a str");
  }
  return nb::cast<std::vector<std::string>>(value);
}

// The cache and compiler kiln.config describes now; `extraFlags` come after kiln.config.cpp_flags.
codegen::KernelCache compilingCache(const std::vector<std::string>& extraFlags) {
  std::vector<std::string> flags = configFlags();
  flags.insert(flags.end(), extraFlags.begin(), extraFlags.end());
  return codegen::KernelCache(configString("cache_dir"),
                              codegen::Toolchain(configString("cpp_compiler"), std::move(flags)));
}

// The cache folder kiln.config describes now, for what does not compile (the compiler settings
// are not read, so a bad one does not stop `kiln cache clear`).
codegen::KernelCache currentCache() { return codegen::KernelCache(configString("cache_dir")); }

} // namespace

void registerKernelCache(nb::module_& m) {
  // def_submodule returns the existing kiln._C._codegen when another part defined it first.
  nb::module_ c = m.def_submodule("_codegen", "generated C++: code generation and compilation");

  nb::class_<KernelHandle>(c, "Kernel", "an entry symbol of a loaded shared object")
      .def_ro("path", &KernelHandle::path)
      .def_ro("entry", &KernelHandle::entry)
      .def_ro("address", &KernelHandle::address)
      .def("__int__", [](const KernelHandle& k) { return k.address; })
      .def("__repr__", [](const KernelHandle& k) {
        return "<kiln kernel " + k.entry + " at " + std::to_string(k.address) + " from " + k.path + ">";
      });

  c.def(
      "compile_source",
      [](const std::string& source, const std::string& entry, const std::vector<std::string>& extraFlags) {
        codegen::KernelCache cache = compilingCache(extraFlags);
        nb::gil_scoped_release release;
        codegen::CompiledKernel kernel = cache.compile(source, entry);
        return std::make_pair(kernel.path, kernel.cacheHit);
      },
      nb::arg("source"), nb::arg("entry") = "kiln_entry", nb::arg("extra_flags") = std::vector<std::string>(),
      "Compiles C++17 `source` into a shared object in the kernel cache (or finds it there) and "
      "loads it; returns (path, cache_hit). A compiler error raises RuntimeError with its output.");
  c.def(
      "toolchain_key",
      [](const std::vector<std::string>& extraFlags) { return compilingCache(extraFlags).toolchainKey(); },
      nb::arg("extra_flags") = std::vector<std::string>(),
      "the hex SHA-256 of kiln's version, the compiler (kiln.config.cpp_compiler), its identity and "
      "flags (kiln.config.cpp_flags, then extra_flags) and the CPU's features: what compile_source's "
      "kernels depend on besides their source");
  c.def(
      "load",
      [](const std::string& path, const std::string& entry) {
        void* address = codegen::KernelCache::load(path, entry);
        return KernelHandle{path, entry, reinterpret_cast<uintptr_t>(address)};
      },
      nb::arg("path"), nb::arg("entry") = "kiln_entry",
      "The symbol `entry` of the shared object at `path` (loaded once per process) as a Kernel.");
  c.def("cache_dir", [] { return currentCache().dir(); }, "the kernel cache folder now in use");
  c.def(
      "cache_info",
      [] {
        codegen::CacheInfo info = currentCache().info();
        nb::dict out;
        out["dir"] = info.dir;
        out["entries"] = info.kernels + info.artifacts;
        out["kernels"] = info.kernels;
        out["artifacts"] = info.artifacts;
        out["bytes"] = info.bytes;
        return out;
      },
      "dict(dir, entries, kernels, artifacts, bytes) of the kernel cache");
  c.def("cache_clear", [] { currentCache().clear(); }, "removes every kernel and artifact of the cache");
  c.def(
      "put_artifact",
      [](const std::string& key, nb::bytes data) {
        currentCache().putArtifact(key, std::string_view(data.c_str(), data.size()));
      },
      nb::arg("key"), nb::arg("data"),
      "stores bytes under a key string (checksummed, written atomically)");
  c.def(
      "get_artifact",
      [](const std::string& key) -> nb::object {
        std::optional<std::string> data = currentCache().getArtifact(key);
        if (!data) return nb::none();
        return nb::bytes(data->data(), data->size());
      },
      nb::arg("key"), "the bytes stored under key, or None (also for a damaged entry, which is removed)");
  c.attr("BASE_FLAGS") = nb::cast(codegen::Toolchain::baseFlags());
  c.attr("KILN_VERSION") = codegen::KernelCache::kilnVersion();
}

} // namespace kiln::python
