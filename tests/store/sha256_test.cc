#include "store/sha256.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <string>

namespace gemlet::store {
namespace {

// FIPS 180-2's examples.
TEST(Sha256, KnownDigests) {
  EXPECT_EQ(Sha256Hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(Sha256Hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(Sha256Hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
}

TEST(Sha256, IncrementalAndFileDigestsAgree) {
  std::string text;
  for (int i = 0; i < 300000; ++i) text += static_cast<char>('a' + i % 26);
  text += "中文";
  Sha256 h;
  for (size_t at = 0; at < text.size(); at += 7777) h.Update(std::string_view(text).substr(at, 7777));
  const std::string whole = Sha256Hex(text);
  EXPECT_EQ(h.FinishHex(), whole);
  const std::string path = ::testing::TempDir() + "/sha256_test.bin";
  std::ofstream(path, std::ios::binary) << text;
  uint64_t last = 0;
  Result<std::string> file = Sha256File(path, [&last](uint64_t done, uint64_t total) {
    EXPECT_LE(done, total);
    last = done;
  });
  ASSERT_TRUE(file.ok()) << file.message();
  EXPECT_EQ(*file, whole);
  EXPECT_EQ(last, text.size());
  std::remove(path.c_str());
  EXPECT_FALSE(Sha256File(path).ok());
}

TEST(Sha256, ParsesHexDigestsOnly) {
  Result<std::string> d = ParseSha256Hex("BA7816BF8F01CFEA414140DE5DAE2223B00361A396177A9CB410FF61F20015AD");
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(*d, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_FALSE(ParseSha256Hex("ba7816").ok());
  EXPECT_FALSE(ParseSha256Hex(std::string(64, 'g')).ok());
  EXPECT_NE(ParseSha256Hex("xyz").message().find("not a SHA-256 digest"), std::string::npos);
}

}  // namespace
}  // namespace gemlet::store
