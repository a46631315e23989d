// The store's C API (gemlet.h): an app that downloads a file itself installs, verifies, switches and
// rolls back through it; errors come back as statuses with gemlet_last_error naming the problem.
#include "gemlet/gemlet.h"

#include <sys/stat.h>

#include <gtest/gtest.h>

#include "store/store_test_util.h"

namespace gemlet {
namespace {

std::string Take(char* s) {
  std::string out = s != nullptr ? s : "";
  gemlet_string_free(s);
  return out;
}

TEST(StoreCApi, InstallVerifySwitchRollback) {
  test::TempDir tmp;
  const std::string a = tmp.File("a.gguf"), b = tmp.File("b.gguf");
  test::WriteFile(a, test::RandomBytes(100000, 1));
  test::WriteFile(b, test::RandomBytes(100000, 2));
  gemlet_store* store = nullptr;
  ASSERT_EQ(gemlet_store_open(tmp.File("store").c_str(), &store), GEMLET_OK) << gemlet_last_error();

  // A wrong digest installs nothing.
  EXPECT_EQ(gemlet_store_install(store, "m", "1", a.c_str(), std::string(64, 'f').c_str(), GEMLET_STORE_ACTIVATE), GEMLET_ERROR);
  EXPECT_NE(std::string(gemlet_last_error()).find("not the expected"), std::string::npos) << gemlet_last_error();
  char* path = nullptr;
  EXPECT_EQ(gemlet_store_resolve(store, "m", &path), GEMLET_ERROR);
  EXPECT_EQ(path, nullptr);

  ASSERT_EQ(gemlet_store_install(store, "m", "1", a.c_str(), test::FileSha(a).c_str(), GEMLET_STORE_ACTIVATE), GEMLET_OK)
      << gemlet_last_error();
  ASSERT_EQ(gemlet_store_install(store, "m", "2", b.c_str(), nullptr, GEMLET_STORE_ACTIVATE | GEMLET_STORE_KEEP_OLD), GEMLET_OK)
      << gemlet_last_error();
  char* version = nullptr;
  ASSERT_EQ(gemlet_store_active_version(store, "m", &version), GEMLET_OK);
  EXPECT_EQ(Take(version), "2");
  int failed = -1;
  EXPECT_EQ(gemlet_store_verify(store, nullptr, &failed), GEMLET_OK);
  EXPECT_EQ(failed, 0);

  ASSERT_EQ(gemlet_store_rollback(store, "m"), GEMLET_OK) << gemlet_last_error();
  ASSERT_EQ(gemlet_store_resolve(store, "m", &path), GEMLET_OK);
  EXPECT_EQ(test::FileSha(Take(path)), test::FileSha(a));
  ASSERT_EQ(gemlet_store_switch(store, "m", "2", false), GEMLET_OK) << gemlet_last_error();
  ASSERT_EQ(gemlet_store_resolve(store, "m", &path), GEMLET_OK);
  const std::string active = Take(path);
  EXPECT_EQ(test::FileSha(active), test::FileSha(b));
  EXPECT_EQ(gemlet_store_rollback(store, "m"), GEMLET_ERROR) << "switched without keep_old: version 1 is gone";
  EXPECT_NE(std::string(gemlet_last_error()).find("no previous version"), std::string::npos);

  // A damaged file fails verify, with the file named.
  ::chmod(active.c_str(), 0644);
  test::WriteFile(active, "damaged");
  EXPECT_EQ(gemlet_store_verify(store, "m", &failed), GEMLET_ERROR);
  EXPECT_EQ(failed, 1);
  EXPECT_NE(std::string(gemlet_last_error()).find(active), std::string::npos) << gemlet_last_error();

  EXPECT_EQ(gemlet_store_remove(store, "m"), GEMLET_OK);
  EXPECT_EQ(gemlet_store_active_version(store, "m", &version), GEMLET_ERROR);
  EXPECT_EQ(gemlet_store_install(store, nullptr, "1", a.c_str(), nullptr, 0), GEMLET_INVALID_ARGUMENT);
  EXPECT_EQ(gemlet_store_install(store, "../m", "1", a.c_str(), nullptr, 0), GEMLET_INVALID_ARGUMENT);
  EXPECT_EQ(gemlet_store_rollback(nullptr, "m"), GEMLET_INVALID_ARGUMENT);
  gemlet_store_free(store);
}

}  // namespace
}  // namespace gemlet
