// audio_encode_bench: one clip through an mmproj's audio tower, below the public API, for profiling
// the tower alone: decode and log-mel features timed apart from the encode, rounds alternating
// between the kernel tables named (e.g. "auto,ref"), each round's times printed, medians at the end.
//   audio_encode_bench MMPROJ.gguf CLIP.wav THREADS ROUNDS [TABLES] [EMBEDDINGS.f32]
// EMBEDDINGS.f32: the first table's embeddings written there (float32, row-major), to compare builds.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <sstream>
#include <string>
#include <vector>

#include "bench_timing.h"
#include "encoders/audio_encoder.h"
#include "kernels/kernels.h"
#include "media/audio.h"
#include "media/audio_features.h"

using gemlet::bench::CpuNow;
using gemlet::bench::Median;
using gemlet::bench::Now;

int main(int argc, char** argv) {
  using namespace gemlet;
  if (argc < 5) {
    std::fprintf(stderr, "usage: %s MMPROJ.gguf CLIP.wav THREADS ROUNDS [TABLES]\n", argv[0]);
    return 2;
  }
  const int threads = std::atoi(argv[3]), rounds = std::atoi(argv[4]);
  const std::vector<std::string> tables = bench::SplitCommas(argc > 5 ? argv[5] : "auto");
  auto encoder = AudioEncoder::Open(argv[1]);
  if (!encoder.ok()) return std::fprintf(stderr, "%s\n", encoder.message().c_str()), 1;
  std::vector<std::vector<double>> feature_ms(tables.size()), encode_ms(tables.size()), cpu_ms(tables.size());
  std::vector<std::vector<float>> first(tables.size());
  for (int round = -1; round < rounds; ++round) {  // round -1: page faults and first allocations
    for (size_t i = 0; i < tables.size(); ++i) {
      const KernelTable* table = KernelsNamed(tables[i]);
      if (table == nullptr) return std::fprintf(stderr, "no kernel table '%s'\n", tables[i].c_str()), 1;
      KernelContext ctx(threads, table);
      const double t0 = Now();
      auto audio = media::LoadAudioFile(argv[2]);
      if (!audio.ok()) return std::fprintf(stderr, "%s\n", audio.message().c_str()), 1;
      auto features = media::ComputeLogMel(audio.value(), media::Gemma4LogMelParams());
      if (!features.ok()) return std::fprintf(stderr, "%s\n", features.message().c_str()), 1;
      const double t1 = Now(), c1 = CpuNow();
      std::vector<float> embeddings;
      auto n = encoder.value()->Encode(features.value().values.data(), features.value().mask.data(),
                                       features.value().num_frames, &embeddings, ctx);
      if (!n.ok()) return std::fprintf(stderr, "%s\n", n.message().c_str()), 1;
      const double t2 = Now(), c2 = CpuNow();
      if (round < 0) {
        first[i] = embeddings;
        if (i == 0 && argc > 6) {
          FILE* f = std::fopen(argv[6], "wb");
          if (f == nullptr || std::fwrite(embeddings.data(), sizeof(float), embeddings.size(), f) != embeddings.size()) {
            return std::fprintf(stderr, "cannot write %s\n", argv[6]), 1;
          }
          std::fclose(f);
        }
        continue;
      }
      float diff = 0;  // against the first table's warm-up round
      for (size_t j = 0; j < embeddings.size(); ++j) diff = std::max(diff, std::abs(embeddings[j] - first[0][j]));
      feature_ms[i].push_back((t1 - t0) * 1e3);
      encode_ms[i].push_back((t2 - t1) * 1e3);
      cpu_ms[i].push_back((c2 - c1) * 1e3);
      std::printf("round %d %s: features %.1f ms, encode %.1f ms (CPU %.1f ms), %d tokens, max |diff| vs %s %.3g\n",
                  round, tables[i].c_str(), (t1 - t0) * 1e3, (t2 - t1) * 1e3, (c2 - c1) * 1e3, n.value(),
                  tables[0].c_str(), diff);
      std::fflush(stdout);
    }
  }
  for (size_t i = 0; i < tables.size(); ++i) {
    std::printf("median %s: features %.1f ms, encode %.1f ms (CPU %.1f ms)\n", tables[i].c_str(),
                Median(feature_ms[i]), Median(encode_ms[i]), Median(cpu_ms[i]));
  }
  return 0;
}
