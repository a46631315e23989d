// Idle costs nothing (#21: a phone pays for every spinning thread): `gemlet chat` waiting for its
// first message and `gemlet serve` with no request, side by side for 10 s, use under 0.05
// CPU-seconds each (utime + stime from /proc/PID/stat).
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <sstream>
#include <thread>

#include "common/test_util.h"

namespace gemlet {
namespace {

// CPU seconds the process has used so far (fields 14 and 15 of /proc/PID/stat, in clock ticks).
double CpuSeconds(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string stat((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const size_t close = stat.rfind(')');  // the command name may hold spaces
  if (close == std::string::npos) return -1;
  std::istringstream fields(stat.substr(close + 2));
  std::string field;
  long utime = 0, stime = 0;
  for (int i = 3; i <= 15 && fields >> field; ++i) {
    if (i == 14) utime = std::stol(field);
    if (i == 15) stime = std::stol(field);
  }
  return static_cast<double>(utime + stime) / static_cast<double>(::sysconf(_SC_CLK_TCK));
}

// Runs `command` via /bin/sh in its own process group; stdin from a pipe kept open (and silent).
struct Child {
  pid_t pid = -1;
  int stdin_fd = -1;
  explicit Child(const std::string& command) {
    int fds[2];
    EXPECT_EQ(::pipe(fds), 0);
    pid = ::fork();
    if (pid == 0) {
      ::setpgid(0, 0);
      ::dup2(fds[0], 0);
      ::close(fds[1]);
      ::execl("/bin/sh", "sh", "-c", ("exec " + command).c_str(), static_cast<char*>(nullptr));
      ::_exit(127);
    }
    ::close(fds[0]);
    stdin_fd = fds[1];
  }
  ~Child() {
    if (pid > 0) {
      ::kill(-pid, SIGKILL);
      ::waitpid(pid, nullptr, 0);
    }
    if (stdin_fd >= 0) ::close(stdin_fd);
  }
};

TEST(IdleCpu, ChatWaitingAndServeWithoutRequestsUseUnderFiftyMillisecondsInTenSeconds) {
  test::TempDir home;
  const std::string env = "HOME=" + home.path() + " XDG_CACHE_HOME=" + home.path() + "/cache ";
  Child chat(env + test::GemletBinary() + " chat -m " GEMLET_DEMO_MODEL " -t 2 >/dev/null 2>&1");
  Child serve(env + test::GemletBinary() + " serve -m " GEMLET_DEMO_MODEL " -t 2 --port 0 -c 256 >/dev/null 2>&1");
  // Let both load, pack their weights and settle: the chat packs in the background at start.
  std::this_thread::sleep_for(std::chrono::seconds(3));
  const double chat0 = CpuSeconds(chat.pid), serve0 = CpuSeconds(serve.pid);
  ASSERT_GE(chat0, 0) << "gemlet chat is not running";
  ASSERT_GE(serve0, 0) << "gemlet serve is not running";
  std::this_thread::sleep_for(std::chrono::seconds(10));
  const double chat_used = CpuSeconds(chat.pid) - chat0, serve_used = CpuSeconds(serve.pid) - serve0;
  std::printf("idle 10 s: chat %.3f CPU-s, serve %.3f CPU-s\n", chat_used, serve_used);
  EXPECT_LT(chat_used, 0.05);
  EXPECT_LT(serve_used, 0.05);
}

}  // namespace
}  // namespace gemlet
