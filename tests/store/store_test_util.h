// What the store's tests share: files of random bytes, the loopback HTTP server of
// http_server.py, running the CLI with its stderr, and reading the server's request log.
#pragma once

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "common/test_util.h"
#include "store/sha256.h"

namespace gemlet::test {

inline std::string RandomBytes(size_t size, uint32_t seed) {
  std::mt19937 rng(seed);
  std::string s(size, '\0');
  for (char& c : s) c = static_cast<char>(rng() & 0xFF);
  return s;
}

inline void WriteFile(const std::string& path, const std::string& bytes) {
  std::filesystem::create_directories(std::filesystem::path(path).parent_path());
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
}

inline std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

inline std::string FileSha(const std::string& path) {
  Result<std::string> d = store::Sha256File(path);
  return d.ok() ? *d : std::string();
}

// http_server.py on a free loopback port, for the life of the object.
class LocalServer {
 public:
  explicit LocalServer(const std::string& root, const std::string& extra = "") {
    log_ = root + "/../server-log-" + std::to_string(::getpid()) + "-" + std::to_string(counter()++) + ".jsonl";
    int out[2];
    if (::pipe(out) != 0) return;
    pid_ = ::fork();
    if (pid_ == 0) {
      ::dup2(out[1], STDOUT_FILENO);
      ::close(out[0]);
      ::close(out[1]);
      const std::string cmd = std::string("exec ") + GEMLET_PYTHON3 + " " + GEMLET_STORE_SERVER + " --root " + root +
                              " --log " + log_ + " " + extra;
      ::execl("/bin/sh", "sh", "-c", cmd.c_str(), static_cast<char*>(nullptr));
      ::_exit(127);
    }
    ::close(out[1]);
    // The port line, read to its end; the pipe stays open for the server's life, so that nothing
    // it writes there later meets a closed pipe.
    std::string line;
    char c = 0;
    while (line.size() < 16 && ::read(out[0], &c, 1) == 1 && c != '\n') line += c;
    pipe_ = out[0];
    port_ = std::atoi(line.c_str());
  }
  ~LocalServer() {
    if (pid_ > 0) {
      ::kill(pid_, SIGTERM);
      ::waitpid(pid_, nullptr, 0);
    }
    if (pipe_ >= 0) ::close(pipe_);
    std::error_code ec;
    std::filesystem::remove(log_, ec);
  }
  int port() const { return port_; }
  std::string Url(const std::string& path) const { return "http://127.0.0.1:" + std::to_string(port_) + path; }
  // The requests so far: {"path", "range", "if_range", "auth"} each.
  std::vector<nlohmann::json> Requests() const {
    std::vector<nlohmann::json> out;
    std::ifstream in(log_);
    for (std::string line; std::getline(in, line);) out.push_back(nlohmann::json::parse(line));
    return out;
  }
  void ClearLog() const { std::ofstream(log_, std::ios::trunc); }

 private:
  static int& counter() {
    static int c = 0;
    return c;
  }
  pid_t pid_ = -1;
  int pipe_ = -1;
  int port_ = 0;
  std::string log_;
};

// `gemlet ARGS` with stdout and stderr together.
inline CommandResult Gemlet(const std::string& args, const std::string& env = "") {
  return RunCommand(env + (env.empty() ? "" : " ") + GemletBinary() + " " + args + " 2>&1 </dev/null");
}

// Lines of text, for the one-line rule.
inline int Lines(const std::string& text) {
  int n = 0;
  for (char c : text) n += c == '\n';
  return n + (!text.empty() && text.back() != '\n');
}

// Files under the store that no state names, outside .partial: what a reader could mistake for a model.
inline std::vector<std::string> UnnamedFiles(const std::string& store) {
  namespace fs = std::filesystem;
  std::vector<std::string> named;
  for (const fs::directory_entry& e : fs::directory_iterator(store)) {
    const std::string state = e.path().string() + "/model.json";
    if (!fs::exists(state)) continue;
    const nlohmann::json j = ReadJson(state);
    for (const nlohmann::json& v : j["versions"]) named.push_back(e.path().string() + "/" + v["file"].get<std::string>());
  }
  std::vector<std::string> out;
  for (auto it = fs::recursive_directory_iterator(store); it != fs::recursive_directory_iterator(); ++it) {
    const std::string p = it->path().string();
    const std::string rel = p.substr(store.size() + 1);
    if (rel.rfind(".partial", 0) == 0) {
      it.disable_recursion_pending();
      continue;
    }
    // The store's own notes beside the models: the lock, the default model, speculation records.
    if (it->is_directory() || rel == ".lock" || rel == ".default" || rel == ".speculation.json" ||
        it->path().filename() == "model.json") {
      continue;
    }
    if (std::find(named.begin(), named.end(), p) == named.end()) out.push_back(rel);
  }
  return out;
}

}  // namespace gemlet::test
