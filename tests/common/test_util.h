// Helpers shared by the test suites: reference data paths, raw f32 files, temp dirs, running the CLI.
#pragma once

#include <unistd.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <sys/wait.h>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

namespace gemlet::test {

inline std::string TestdataDir() { return GEMLET_TESTDATA_DIR; }
inline std::string GemletBinary() { return std::string(GEMLET_BINARY_DIR) + "/apps/gemlet/gemlet"; }

// Whether the kernel table of this name (as gemlet::AvailableKernels() lists it) repacks quantized
// weights, and so uses the packed-weight cache: AVX3_DL, AVX2_VNNI and AVX2 on x86, NEON_I8MM and
// NEON_DOTPROD on ARM.
inline bool KernelTablePacksWeights(const std::string& name) {
  return name == "AVX3_DL" || name == "AVX2_VNNI" || name == "AVX2" || name == "NEON_I8MM" || name == "NEON_DOTPROD";
}

// A raw little-endian array file of T (the goldens' .f32, .i32, .u8); empty when it cannot be read.
template <class T>
std::vector<T> ReadRawFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<T> out(bytes.size() / sizeof(T));
  std::memcpy(out.data(), bytes.data(), out.size() * sizeof(T));
  return out;
}
inline std::vector<float> ReadF32File(const std::string& path) { return ReadRawFile<float>(path); }

inline nlohmann::json ReadJson(const std::string& path) {
  std::ifstream in(path);
  return nlohmann::json::parse(in);
}

// A fresh directory under the system temp dir, removed when the object goes away.
class TempDir {
 public:
  TempDir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "gemlet-test-XXXXXX").string();
    path_ = ::mkdtemp(tmpl.data()) ? tmpl : std::string();
  }
  ~TempDir() {
    std::error_code ec;
    if (!path_.empty()) std::filesystem::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }
  std::string File(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

struct CommandResult {
  int exit_code = -1;
  std::string out;  // stdout
};

// Runs a shell command, capturing stdout (stderr goes to the given file if any).
inline CommandResult RunCommand(const std::string& command) {
  CommandResult r;
  std::FILE* p = ::popen(command.c_str(), "r");
  if (!p) return r;
  std::array<char, 4096> buf;
  size_t n;
  while ((n = std::fread(buf.data(), 1, buf.size(), p)) > 0) r.out.append(buf.data(), n);
  const int status = ::pclose(p);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

// The house rule for bad input: `gemlet ARGS` (no stdin) exits non-zero with exactly one line of
// output, and that line contains `expect`.
struct BadInputCase {
  std::string args;
  std::string expect;
};
inline void ExpectOneClearErrorLine(const std::vector<BadInputCase>& cases) {
  for (const BadInputCase& c : cases) {
    const CommandResult r = RunCommand(GemletBinary() + " " + c.args + " 2>&1 </dev/null");
    EXPECT_NE(r.exit_code, 0) << c.args;
    EXPECT_NE(r.out.find(c.expect), std::string::npos) << c.args << " -> " << r.out;
    EXPECT_EQ(std::count(r.out.begin(), r.out.end(), '\n'), 1) << c.args << " -> " << r.out;
  }
}

inline std::string ReadTextFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// The larger of a running worst error and one more error, where a NaN error (a NaN on either side)
// counts as infinitely bad: `std::max(worst, NaN)` keeps `worst`, so a reduction written that way
// would let a NaN through.
inline double Worse(double worst, double error) { return std::isnan(error) ? INFINITY : std::max(worst, error); }
inline float Worse(float worst, float error) { return std::isnan(error) ? INFINITY : std::max(worst, error); }

// Largest |a-b| over two arrays of n values; infinity where either holds a NaN or only one side is
// infinite, so that `EXPECT_LE(MaxAbsDiff(...), tol)` fails on them.
inline float MaxAbsDiff(const float* a, const float* b, size_t n) {
  float m = 0;
  for (size_t i = 0; i < n; ++i) {
    if (a[i] == b[i]) continue;  // also the same infinity
    m = Worse(m, std::abs(a[i] - b[i]));
  }
  return m;
}
// The same for two vectors, which must have the same size (a short one is infinitely far).
inline float MaxAbsDiff(const std::vector<float>& a, const std::vector<float>& b) {
  if (a.size() != b.size()) return INFINITY;
  return MaxAbsDiff(a.data(), b.data(), a.size());
}

// Reads a raw little-endian f32 file that must hold exactly `n` values: for ASSERT_TRUE, so that a
// missing, short or long reference file fails the test instead of being read past or half-compared.
inline ::testing::AssertionResult ReadF32Exactly(const std::string& path, size_t n, std::vector<float>* out) {
  std::error_code ec;
  const auto bytes = std::filesystem::file_size(path, ec);
  if (ec) return ::testing::AssertionFailure() << path << ": " << ec.message();
  if (bytes != n * sizeof(float)) {
    return ::testing::AssertionFailure() << path << " holds " << bytes << " bytes, " << n * sizeof(float)
                                         << " expected (" << n << " f32 values)";
  }
  *out = ReadF32File(path);
  return ::testing::AssertionSuccess();
}

// Index of the largest value; -1 when the row holds a NaN (no NaN row may pass for any token).
inline int ArgMax(const float* row, int n) {
  int best = 0;
  for (int i = 0; i < n; ++i) {
    if (std::isnan(row[i])) return -1;
    best = row[i] > row[best] ? i : best;
  }
  return best;
}

}  // namespace gemlet::test
