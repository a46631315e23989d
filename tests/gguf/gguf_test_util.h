// Helpers for the GGUF tests: a byte builder for hand-made files, temp paths, exact-size parsing.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "gguf/gguf_reader.h"

namespace gemlet::testing {

// Builds GGUF bytes field by field, so a test can write exactly the (broken) file it needs.
class Builder {
 public:
  template <typename T>
  Builder& Put(T v) {
    const size_t at = bytes_.size();
    bytes_.resize(at + sizeof(T));
    std::memcpy(bytes_.data() + at, &v, sizeof(T));
    return *this;
  }
  Builder& U8(uint8_t v) { return Put(v); }
  Builder& U32(uint32_t v) { return Put(v); }
  Builder& U64(uint64_t v) { return Put(v); }
  Builder& Str(std::string_view s) {
    U64(s.size());
    bytes_.insert(bytes_.end(), s.begin(), s.end());
    return *this;
  }
  Builder& Raw(const void* p, size_t n) {
    const auto* b = static_cast<const uint8_t*>(p);
    bytes_.insert(bytes_.end(), b, b + n);
    return *this;
  }
  Builder& Header(uint64_t n_tensors, uint64_t n_kv, uint32_t version = 3) {
    return U32(0x46554747).U32(version).U64(n_tensors).U64(n_kv);
  }
  Builder& KvU32(std::string_view key, uint32_t v) { return Str(key).U32(4).U32(v); }
  Builder& KvStr(std::string_view key, std::string_view v) { return Str(key).U32(8).Str(v); }
  Builder& Tensor(std::string_view name, const std::vector<uint64_t>& ne, uint32_t type, uint64_t offset) {
    Str(name).U32(static_cast<uint32_t>(ne.size()));
    for (uint64_t n : ne) U64(n);
    return U32(type).U64(offset);
  }
  Builder& AlignTo(size_t alignment) {
    while (bytes_.size() % alignment != 0) bytes_.push_back(0);
    return *this;
  }
  Builder& Zeros(size_t n) {
    bytes_.insert(bytes_.end(), n, 0);
    return *this;
  }
  size_t size() const { return bytes_.size(); }
  const std::vector<uint8_t>& bytes() const { return bytes_; }

 private:
  std::vector<uint8_t> bytes_;
};

// A file name unique to this process and test, in gtest's temp folder (ctest runs tests in parallel).
// Removes the files TempPath named when their test ends: a test run leaves nothing in the temp folder.
class TempFileCleaner : public ::testing::EmptyTestEventListener {
 public:
  void Add(std::string path) { paths_.push_back(std::move(path)); }
  void OnTestEnd(const ::testing::TestInfo&) override {
    for (const std::string& p : paths_) std::remove(p.c_str());
    paths_.clear();
  }

 private:
  std::vector<std::string> paths_;
};

inline TempFileCleaner& TempFiles() {
  // Owned by gtest's listener list once appended (it deletes its listeners at exit).
  static TempFileCleaner* cleaner = [] {
    auto* c = new TempFileCleaner;
    ::testing::UnitTest::GetInstance()->listeners().Append(c);
    return c;
  }();
  return *cleaner;
}

inline std::string TempPath(const std::string& name) {
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  std::string test = info ? std::string(info->test_suite_name()) + "." + info->name() : "none";
  for (char& c : test) {
    if (c == '/') c = '_';
  }
  std::string path = ::testing::TempDir() + "gemlet_" + std::to_string(::getpid()) + "_" + test + "_" + name;
  TempFiles().Add(path);
  return path;
}

inline std::vector<uint8_t> ReadBytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

inline bool FileExists(const std::string& path) { return ::access(path.c_str(), F_OK) == 0; }

// Parses a copy of `bytes` in a heap block of exactly that size, so ASan catches any read past it.
// The copy lives as long as the returned holder.
struct Parsed {
  std::unique_ptr<uint8_t[]> copy;
  size_t size = 0;
  Result<std::unique_ptr<GgufFile>> file = Status::Error("not parsed");
};

inline Parsed ParseExact(const uint8_t* bytes, size_t size) {
  Parsed p;
  p.size = size;
  p.copy.reset(size ? new uint8_t[size] : nullptr);
  if (size) std::memcpy(p.copy.get(), bytes, size);
  p.file = GgufFile::Parse(p.copy.get(), size, "test.gguf");
  return p;
}
inline Parsed ParseExact(const std::vector<uint8_t>& bytes) { return ParseExact(bytes.data(), bytes.size()); }

// The error of parsing `bytes`, or "" when it parsed.
inline std::string ParseError(const std::vector<uint8_t>& bytes) {
  Parsed p = ParseExact(bytes);
  return p.file.ok() ? std::string() : p.file.message();
}

}  // namespace gemlet::testing
