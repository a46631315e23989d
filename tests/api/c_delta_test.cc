// The C API's file digests and delta patches (gemlet.h): verify, read a patch, apply it, on the demo
// model and a copy of it with one tensor changed; in a build without them, one clear error.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include "common/test_util.h"
#include "gemlet/delta.hpp"
#include "gemlet/gemlet.h"

namespace {

const std::string kModel = GEMLET_DEMO_MODEL;

std::string ReadBytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

TEST(CDelta, NotBuiltSaysSo) {
  if (gemlet_delta_available()) GTEST_SKIP() << "built with the delta format";
  char hex[65];
  EXPECT_EQ(gemlet_file_sha256(kModel.c_str(), hex), GEMLET_ERROR);
  EXPECT_NE(std::string(gemlet_last_error()).find("built without the model store"), std::string::npos);
  EXPECT_EQ(gemlet_delta_apply(kModel.c_str(), kModel.c_str(), "/nonexistent/x", nullptr, nullptr), GEMLET_ERROR);
  EXPECT_NE(std::string(gemlet_last_error()).find("built without the model store"), std::string::npos);
}

TEST(CDelta, FileDigestsAndVerification) {
  if (!gemlet_delta_available()) GTEST_SKIP() << "built without the delta format";
  gemlet::test::TempDir d;
  std::ofstream(d.File("abc"), std::ios::binary) << "abc";
  char hex[65];
  ASSERT_EQ(gemlet_file_sha256(d.File("abc").c_str(), hex), GEMLET_OK) << gemlet_last_error();
  EXPECT_STREQ(hex, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(gemlet_file_verify(d.File("abc").c_str(), "BA7816BF8F01CFEA414140DE5DAE2223B00361A396177A9CB410FF61F20015AD"),
            GEMLET_OK);
  const std::string wrong(64, '0');
  EXPECT_EQ(gemlet_file_verify(d.File("abc").c_str(), wrong.c_str()), GEMLET_ERROR);
  EXPECT_NE(std::string(gemlet_last_error()).find("has SHA-256 ba7816bf"), std::string::npos) << gemlet_last_error();
  EXPECT_EQ(gemlet_file_verify(d.File("abc").c_str(), "abc"), GEMLET_INVALID_ARGUMENT);
  EXPECT_EQ(gemlet_file_sha256(d.File("missing").c_str(), hex), GEMLET_ERROR);
  EXPECT_NE(std::string(gemlet_last_error()).find("missing"), std::string::npos);
  EXPECT_EQ(gemlet_file_sha256(nullptr, hex), GEMLET_INVALID_ARGUMENT);
  EXPECT_EQ(gemlet_file_sha256(d.File("abc").c_str(), nullptr), GEMLET_INVALID_ARGUMENT);
}

TEST(CDelta, ApplyRebuildsTheNewFileAndRefusesAWrongOne) {
  if (!gemlet_delta_available()) GTEST_SKIP() << "built without the delta format";
  gemlet::test::TempDir d;
  // NEW: the demo model with a byte of its last tensor's data changed (still a valid GGUF).
  std::string bytes = ReadBytes(kModel);
  bytes[bytes.size() - 1000] ^= 0x5a;
  std::ofstream(d.File("new.gguf"), std::ios::binary) << bytes;
  gemlet::Result<gemlet::delta::DiffReport> diff = gemlet::delta::Diff(kModel, d.File("new.gguf"), d.File("p"));
  ASSERT_TRUE(diff.ok()) << diff.message();
  EXPECT_EQ(diff->tensors_changed, 1);
  EXPECT_LT(diff->patch_bytes, diff->new_file_bytes / 4);

  gemlet_patch_info info = gemlet_patch_info_default();
  ASSERT_EQ(gemlet_patch_info_read(d.File("p").c_str(), &info), GEMLET_OK) << gemlet_last_error();
  EXPECT_EQ(info.new_size, bytes.size());
  EXPECT_EQ(info.new_sha256, diff->new_sha256);
  EXPECT_EQ(info.old_sha256, diff->old_sha256);
  EXPECT_EQ(info.patch_size, diff->patch_bytes);
  EXPECT_EQ(info.literal_bytes, diff->literal_bytes);
  EXPECT_EQ(gemlet_file_verify(kModel.c_str(), info.old_sha256), GEMLET_OK);

  float last = -1;
  auto progress = [](float fraction, void* user) {
    EXPECT_GE(fraction, *static_cast<float*>(user));
    *static_cast<float*>(user) = fraction;
    return true;
  };
  ASSERT_EQ(gemlet_delta_apply(kModel.c_str(), d.File("p").c_str(), d.File("out.gguf").c_str(), progress, &last),
            GEMLET_OK)
      << gemlet_last_error();
  EXPECT_EQ(last, 1.0f);
  EXPECT_EQ(ReadBytes(d.File("out.gguf")), bytes);

  // The patch applies to the demo model only: applying it to NEW names both digests, writes nothing.
  EXPECT_EQ(gemlet_delta_apply(d.File("new.gguf").c_str(), d.File("p").c_str(), d.File("x").c_str(), nullptr, nullptr),
            GEMLET_ERROR);
  EXPECT_NE(std::string(gemlet_last_error()).find("the patch was made from " + diff->old_sha256), std::string::npos)
      << gemlet_last_error();
  EXPECT_FALSE(std::filesystem::exists(d.File("x")));
  auto cancel = [](float, void*) { return false; };
  EXPECT_EQ(gemlet_delta_apply(kModel.c_str(), d.File("p").c_str(), d.File("x").c_str(), cancel, nullptr),
            GEMLET_CANCELLED);
  EXPECT_FALSE(std::filesystem::exists(d.File("x")));
  EXPECT_EQ(gemlet_delta_apply(nullptr, d.File("p").c_str(), d.File("x").c_str(), nullptr, nullptr),
            GEMLET_INVALID_ARGUMENT);
  EXPECT_EQ(gemlet_patch_info_read(d.File("new.gguf").c_str(), &info), GEMLET_ERROR);
  EXPECT_NE(std::string(gemlet_last_error()).find("not a gemlet patch"), std::string::npos);
}

}  // namespace
