// Toolchain and KernelCache: compiling, cache hits, damaged entries, compile errors, artifacts.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "codegen/KernelCache.h"
#include "codegen/Sha256.h"

namespace fs = std::filesystem;
using namespace kiln::codegen;

namespace {

// Each test gets its own cache folder (a child of a fresh temporary folder, so that the cache
// creates it), removed afterwards.
class KernelCacheTest : public ::testing::Test {
protected:
  void SetUp() override {
    std::string pattern = (fs::temp_directory_path() / "kiln-cache-test-XXXXXX").string();
    ASSERT_NE(mkdtemp(pattern.data()), nullptr);
    root_ = pattern;
    dir_ = root_ + "/cache";
  }
  void TearDown() override { fs::remove_all(root_); }

  static std::string kernelSource(const std::string& entry, int value) {
    return "extern \"C\" int " + entry + "(int x) { return x * " + std::to_string(value) + "; }\n";
  }
  static int call(void* entry, int x) { return reinterpret_cast<int (*)(int)>(entry)(x); }
  static int modeOf(const std::string& path) {
    struct stat st;
    EXPECT_EQ(stat(path.c_str(), &st), 0);
    return int(st.st_mode & 0777);
  }
  static void writeBytes(const std::string& path, const std::string& bytes) {
    std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
  }
  static std::string readBytes(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), {});
  }

  std::string root_, dir_;
};

TEST(Sha256Test, KnownDigests) {
  EXPECT_EQ(sha256Hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(sha256Hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(sha256Hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  Sha256 pieces; // the same bytes fed in uneven pieces across block boundaries
  std::string million(1000000, 'a');
  for (size_t at = 0; at < million.size(); at += 777) pieces.update(std::string_view(million).substr(at, 777));
  EXPECT_EQ(pieces.hexDigest(), "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

TEST_F(KernelCacheTest, CompilesOnceThenHits) {
  KernelCache cache(dir_);
  CompiledKernel first = cache.compile(kernelSource("kiln_entry", 3));
  EXPECT_FALSE(first.cacheHit);
  EXPECT_EQ(call(first.entry, 5), 15);
  EXPECT_EQ(first.path, cache.kernelPath(cache.kernelKey(kernelSource("kiln_entry", 3))));
  EXPECT_TRUE(fs::exists(cache.sourcePath(cache.kernelKey(kernelSource("kiln_entry", 3)))));
  // The cache folders are private to this user.
  EXPECT_EQ(modeOf(dir_), 0700);
  EXPECT_EQ(modeOf(dir_ + "/kernels"), 0700);

  CompiledKernel second = KernelCache(dir_).compile(kernelSource("kiln_entry", 3));
  EXPECT_TRUE(second.cacheHit);
  EXPECT_EQ(second.entry, first.entry); // loaded once per process
  EXPECT_EQ(KernelCache::load(first.path, "kiln_entry"), first.entry);
  EXPECT_THROW(KernelCache::load(first.path, "no_such_symbol"), kiln::Error);

  CacheInfo info = cache.info();
  EXPECT_EQ(info.kernels, 1);
  EXPECT_GT(info.bytes, 0);
  cache.clear();
  EXPECT_EQ(cache.info().kernels, 0);
  EXPECT_EQ(cache.info().bytes, 0);
}

TEST_F(KernelCacheTest, KeyDependsOnFlagsAndSource) {
  KernelCache plain(dir_), tuned(dir_, Toolchain("", {"-DKILN_TEST_FLAG"}));
  EXPECT_EQ(plain.kernelKey("a"), KernelCache(dir_).kernelKey("a"));
  EXPECT_NE(plain.kernelKey("a"), plain.kernelKey("b"));
  EXPECT_NE(plain.kernelKey("a"), tuned.kernelKey("a"));
  EXPECT_EQ(plain.kernelKey("a").size(), 64u);
}

TEST_F(KernelCacheTest, DamagedEntriesAreRebuilt) {
  KernelCache cache(dir_);
  CompiledKernel good = cache.compile(kernelSource("kiln_entry", 2));
  std::string library = readBytes(good.path);
  ASSERT_GT(library.size(), 1000u);

  // A truncated shared object where another kernel's entry should be.
  std::string truncatedSource = kernelSource("kiln_entry", 7);
  std::string truncatedPath = cache.kernelPath(cache.kernelKey(truncatedSource));
  writeBytes(truncatedPath, library.substr(0, library.size() / 2));
  CompiledKernel rebuilt = cache.compile(truncatedSource);
  EXPECT_FALSE(rebuilt.cacheHit);
  EXPECT_EQ(call(rebuilt.entry, 3), 21);
  EXPECT_THROW(KernelCache::load(good.path + ".missing", "kiln_entry"), kiln::Error);

  // A complete shared object lacking the entry symbol.
  std::string otherSource = kernelSource("other_entry", 5);
  std::string otherPath = cache.kernelPath(cache.kernelKey(otherSource));
  writeBytes(otherPath, library);
  CompiledKernel other = cache.compile(otherSource, "other_entry");
  EXPECT_FALSE(other.cacheHit);
  EXPECT_EQ(call(other.entry, 3), 15);

  // Not a shared object at all.
  writeBytes(dir_ + "/kernels/garbage.so", "not an ELF file");
  EXPECT_THROW(KernelCache::load(dir_ + "/kernels/garbage.so", "kiln_entry"), kiln::Error);
}

TEST_F(KernelCacheTest, CompileErrorCarriesCompilerOutputAndSource) {
  KernelCache cache(dir_);
  std::string source = "extern \"C\" int kiln_entry(int x) { return x + undeclared_name; }\n";
  try {
    cache.compile(source);
    FAIL() << "expected a CompileError";
  } catch (const CompileError& e) {
    std::string message = e.what();
    EXPECT_NE(message.find("undeclared_name"), std::string::npos) << message;
    EXPECT_NE(message.find("error"), std::string::npos) << message;
    EXPECT_NE(message.find(e.sourcePath), std::string::npos) << message;
    EXPECT_EQ(readBytes(e.sourcePath), source);
    EXPECT_NE(e.compilerOutput.find("undeclared_name"), std::string::npos);
  }
  EXPECT_EQ(cache.info().kernels, 0); // no partial output left behind
  for (const auto& e : fs::directory_iterator(dir_ + "/kernels")) {
    EXPECT_EQ(e.path().string().find(".tmp."), std::string::npos) << e.path();
  }
}

TEST_F(KernelCacheTest, MissingCompilerIsAnError) {
  KernelCache cache(dir_, Toolchain("kiln-no-such-compiler"));
  EXPECT_THROW(cache.compile(kernelSource("kiln_entry", 1)), kiln::Error);
}

TEST_F(KernelCacheTest, ArtifactsRoundTripAndDamageIsDetected) {
  KernelCache cache(dir_);
  EXPECT_FALSE(cache.getArtifact("graph-a").has_value());
  std::string payload("lowered\0program", 15);
  cache.putArtifact("graph-a", payload);
  EXPECT_EQ(cache.getArtifact("graph-a"), payload);
  EXPECT_FALSE(cache.getArtifact("graph-b").has_value());
  EXPECT_EQ(modeOf(dir_ + "/artifacts"), 0700);
  EXPECT_EQ(cache.info().artifacts, 1);

  std::string path = cache.artifactPath("graph-a");
  std::string bytes = readBytes(path);
  bytes.back() ^= 1;
  writeBytes(path, bytes);
  EXPECT_FALSE(cache.getArtifact("graph-a").has_value());
  EXPECT_FALSE(fs::exists(path)); // removed

  cache.putArtifact("graph-a", payload);
  writeBytes(path, readBytes(path).substr(0, 20));
  EXPECT_FALSE(cache.getArtifact("graph-a").has_value());
  cache.putArtifact("graph-a", "");
  EXPECT_EQ(cache.getArtifact("graph-a"), std::string());
}

TEST_F(KernelCacheTest, RefusesAFolderOthersCanWrite) {
  fs::create_directories(dir_);
  chmod(dir_.c_str(), 0777);
  KernelCache cache(dir_);
  EXPECT_THROW(cache.putArtifact("k", "v"), kiln::Error);
  chmod(dir_.c_str(), 0700);
  EXPECT_NO_THROW(cache.putArtifact("k", "v"));
}

} // namespace
