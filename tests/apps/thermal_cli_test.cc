// `gemlet run` and `gemlet chat` under the thermal governor on the demo model: a hot fake skin zone
// throttles the answer (reported by --stats) without changing it, and bad thermal flags or an
// unknown zone are one clear error line.
#include <gtest/gtest.h>

#include <string>

#include "common/test_util.h"
#include "common/thermal_device.h"

namespace gemlet {
namespace {

const std::string kModel = GEMLET_DEMO_MODEL;

TEST(ThermalCli, AHotSkinZoneThrottlesRunAndChatWithoutChangingTheAnswer) {
  test::TempDir dir;
  test::FakeSysfs sysfs(dir.path());
  sysfs.AddZone(0, "x86_pkg_temp", 90);
  sysfs.AddZone(1, "skin-therm", 50);
  const std::string run = test::GemletBinary() + " run -m " + kModel + " --temp 0 -n 12 --no-cache -p 'Who are you?'";
  const std::string log = dir.File("stderr.txt");
  const test::CommandResult hot = test::RunCommand(run + " -t 2 --thermal-root " + dir.path() + " --stats 2>" + log);
  ASSERT_EQ(hot.exit_code, 0);
  const std::string err = test::ReadTextFile(log);
  EXPECT_NE(err.find("[thermal]"), std::string::npos) << err;
  EXPECT_NE(err.find("zone skin-therm at 50.0 C"), std::string::npos) << err;
  EXPECT_NE(err.find("threads down to 1"), std::string::npos) << err;
  // The same answer as one thread with no governor (a hot 2-thread run runs on 1 from its first step).
  const test::CommandResult ref = test::RunCommand(run + " -t 1 --no-thermal --stats 2>" + log);
  ASSERT_EQ(ref.exit_code, 0);
  EXPECT_EQ(hot.out, ref.out);
  EXPECT_EQ(test::ReadTextFile(log).find("[thermal]"), std::string::npos);
  // Over the limit the zone would throttle; a limit above its reading does not.
  test::RunCommand(run + " -t 2 --thermal-root " + dir.path() + " --thermal-limit 60 --stats 2>" + log);
  EXPECT_EQ(test::ReadTextFile(log).find("[thermal]"), std::string::npos);

  const test::CommandResult chat = test::RunCommand("printf 'Who are you?\\n/stats\\n' | " + test::GemletBinary() +
                                                    " chat -m " + kModel + " --temp 0 -n 12 -t 2 --no-cache "
                                                    "--thermal-zone thermal_zone1 --thermal-root " + dir.path() +
                                                    " 2>" + log);
  ASSERT_EQ(chat.exit_code, 0);
  EXPECT_NE(test::ReadTextFile(log).find("[thermal]"), std::string::npos) << test::ReadTextFile(log);
}

TEST(ThermalCli, BadThermalFlagsGiveOneClearErrorLine) {
  test::TempDir dir;
  test::FakeSysfs sysfs(dir.path());
  sysfs.AddZone(0, "x86_pkg_temp", 90);
  const std::string run = "run -m " + kModel + " -p hi --no-cache --thermal-root " + dir.path();
  test::ExpectOneClearErrorLine({
      {run + " --thermal-zone skin", "no thermal zone 'skin'"},
      {run + " --thermal-zone skin", "x86_pkg_temp (thermal_zone0)"},
      {"chat -m " + kModel + " --thermal-root " + dir.path() + " --thermal-zone case", "no thermal zone 'case'"},
      {run + " --thermal-limit hot", "--thermal-limit"},
      {run + " --thermal-limit 5", "--thermal-limit"},
  });
  // No zone named and none suitable: the governor is off and the run goes on.
  EXPECT_EQ(test::RunCommand(test::GemletBinary() + " " + run + " -n 2 >/dev/null 2>&1").exit_code, 0);
}

}  // namespace
}  // namespace gemlet
