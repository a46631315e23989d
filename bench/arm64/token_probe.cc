// The work of one prefill and of a few decode steps, and nothing else, for counting instructions per
// token under an emulator (bench/arm64/insns_per_token.sh): load the model, prefill n_prompt tokens
// (<bos> and fixed pseudo-random ids) in one batch, then decode n_gen tokens one at a time, and exit.
// Two runs that differ only in n_prompt (or n_gen) differ only by those tokens' work: loading,
// packing and set-up cancel out.
//   gemlet_token_probe MODEL N_PROMPT N_GEN [THREADS [KERNELS]]
#include <cstdio>
#include <cstdlib>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "gemlet/gemlet.hpp"

int main(int argc, char** argv) {
  if (argc < 4) {
    std::fprintf(stderr, "usage: %s MODEL N_PROMPT N_GEN [THREADS [KERNELS]]\n", argv[0]);
    return 2;
  }
  const int n_prompt = std::atoi(argv[2]), n_gen = std::atoi(argv[3]);
  const int n_threads = argc > 4 ? std::atoi(argv[4]) : 1;
  if (n_prompt < 1 || n_gen < 0 || n_threads < 1) {
    std::fprintf(stderr, "N_PROMPT must be at least 1, N_GEN at least 0 and THREADS at least 1\n");
    return 2;
  }
  gemlet::EngineOptions engine_options;
  if (argc > 5) engine_options.kernels.kernels = argv[5];
  engine_options.thermal.enabled = false;  // measure the work, not the governor's pacing
  auto loaded = gemlet::Engine::Load(argv[1], engine_options);
  if (!loaded.ok()) {
    std::fprintf(stderr, "%s\n", loaded.message().c_str());
    return 1;
  }
  const gemlet::ModelInfo& info = loaded.value()->info();
  gemlet::SessionOptions options;
  options.n_ctx = n_prompt + n_gen + 1;
  options.n_threads = n_threads;
  options.max_batch = n_prompt;
  auto created = gemlet::Session::Create(loaded.value(), options);
  if (!created.ok()) {
    std::fprintf(stderr, "%s\n", created.message().c_str());
    return 1;
  }
  gemlet::Session& session = *created.value();
  std::mt19937 rng(1234);
  std::uniform_int_distribution<int32_t> id(4, info.n_vocab - 1);
  std::vector<int32_t> prompt(static_cast<size_t>(n_prompt));
  for (int32_t& t : prompt) t = id(rng);
  prompt[0] = 2;  // <bos>
  std::vector<float> logits(static_cast<size_t>(info.n_vocab));
  gemlet::Status status = session.Evaluate(prompt, logits.data(), /*all_logits=*/false);
  for (int i = 0; i < n_gen && status.ok(); ++i) {
    const int32_t token = id(rng);
    status = session.Evaluate(std::span<const int32_t>(&token, 1), logits.data(), false);
  }
  if (!status.ok()) {
    std::fprintf(stderr, "%s\n", status.message().c_str());
    return 1;
  }
  std::printf("%s: prefilled %d, decoded %d tokens on %s\n", info.architecture.c_str(), n_prompt, n_gen,
              engine_options.kernels.kernels.c_str());
  return 0;
}
