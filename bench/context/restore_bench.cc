// Suspend and resume against re-prefilling, over the public API: a session evaluates N tokens
// (timed: what resuming by re-reading the conversation costs), saves its state (timed, with the
// file's size), and a fresh session restores it (timed). The next logits of both must be the same
// bits, or the run fails.
//
//   gemlet_restore_bench -m MODEL.gguf [-n 2000] [-t 2] [-r 3] [--file /tmp/gemlet-restore.gsess]
#include <sys/stat.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "gemlet/gemlet.hpp"

namespace {

double Now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  std::string model, file = "/tmp/gemlet-restore.gsess";
  int n = 2000, threads = 2, reps = 3;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i];
    if (a == "-m") model = argv[i + 1];
    else if (a == "-n") n = std::atoi(argv[i + 1]);
    else if (a == "-t") threads = std::atoi(argv[i + 1]);
    else if (a == "-r") reps = std::atoi(argv[i + 1]);
    else if (a == "--file") file = argv[i + 1];
    else return std::fprintf(stderr, "unknown flag %s\n", a.c_str()), 2;
  }
  if (model.empty() || n <= 1 || threads <= 0 || reps <= 0) {
    return std::fprintf(stderr, "usage: %s -m MODEL.gguf [-n TOKENS] [-t THREADS] [-r REPS] [--file PATH]\n", argv[0]), 2;
  }
  auto engine = gemlet::Engine::Load(model);
  if (!engine.ok()) return std::fprintf(stderr, "%s\n", engine.message().c_str()), 1;
  const int n_vocab = (*engine)->info().n_vocab;
  std::vector<int32_t> tokens(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) tokens[static_cast<size_t>(i)] = 4 + (i * 7919) % std::max(5, n_vocab - 5);
  if ((*engine)->bos_token() >= 0) tokens[0] = (*engine)->bos_token();
  gemlet::SessionOptions so;
  so.n_ctx = n + 8;
  so.n_threads = threads;
  std::vector<double> prefill, save, restore;
  std::vector<float> a(static_cast<size_t>(n_vocab)), b(a.size());
  const int32_t next = 17;
  for (int r = 0; r < reps; ++r) {
    auto s = gemlet::Session::Create(*engine, so);
    if (!s.ok()) return 1;
    double t0 = Now();
    if (!(*s)->Evaluate(tokens).ok()) return 1;
    prefill.push_back(Now() - t0);
    t0 = Now();
    if (gemlet::Status st = (*s)->SaveState(file); !st.ok()) return std::fprintf(stderr, "%s\n", st.message().c_str()), 1;
    save.push_back(Now() - t0);
    auto fresh = gemlet::Session::Create(*engine, so);
    if (!fresh.ok()) return 1;
    t0 = Now();
    if (gemlet::Status st = (*fresh)->LoadState(file); !st.ok()) return std::fprintf(stderr, "%s\n", st.message().c_str()), 1;
    restore.push_back(Now() - t0);
    if (!(*s)->Evaluate(std::vector<int32_t>{next}, a.data()).ok() ||
        !(*fresh)->Evaluate(std::vector<int32_t>{next}, b.data()).ok() || a != b) {
      return std::fprintf(stderr, "the restored session's next logits differ\n"), 1;
    }
  }
  struct stat st {};
  ::stat(file.c_str(), &st);
  std::printf("model %s, %d tokens, %d threads (median of %d)\n", model.c_str(), n, threads, reps);
  std::printf("  re-prefill  %9.1f ms\n", Median(prefill) * 1e3);
  std::printf("  save        %9.1f ms   (%.1f MiB file)\n", Median(save) * 1e3, static_cast<double>(st.st_size) / (1 << 20));
  std::printf("  restore     %9.1f ms   (%.0fx faster than the re-prefill; next logits identical)\n",
              Median(restore) * 1e3, Median(prefill) / std::max(1e-9, Median(restore)));
  std::remove(file.c_str());
  return 0;
}
