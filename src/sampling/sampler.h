// Sampler: turns a row of logits into the next token — penalties, temperature, top-k, top-p, min-p,
// and a seeded random draw that is reproducible on every platform.
#pragma once

#include <cstdint>
#include <deque>
#include <string>
#include <utility>
#include <vector>

#include "gemlet/types.hpp"

namespace gemlet {

// The options are the public ones (gemlet/types.hpp). Empty when valid, else what is wrong (for
// CLI and API errors).
std::string ValidateSampling(const SamplingOptions& options);

// PCG32 (O'Neill): tiny, fast and fully specified, so seeds reproduce across compilers.
class Pcg32 {
 public:
  explicit Pcg32(uint64_t seed);
  uint32_t Next();
  double NextUnit();  // uniform in [0, 1) with 53 random bits

 private:
  uint64_t state_ = 0;
  uint64_t inc_ = 0;
};

class Sampler {
 public:
  Sampler(const SamplingOptions& params, int n_vocab);

  // Picks the next token from logits [n_vocab] (not modified), given the tokens accepted so far.
  int Sample(const float* logits);
  // Records a token (prompt or generated) in the penalty window.
  void Accept(int32_t token);
  void Reset();        // window and random stream back to the start
  void ClearWindow();  // forget the penalty window only
  const SamplingOptions& params() const { return params_; }

 private:
  struct Candidate {
    float logit;
    int32_t id;
  };
  void ApplyBias();
  void ApplyPenalties();

  SamplingOptions params_;
  int n_vocab_;
  Pcg32 rng_;
  bool penalized_;     // a repeat, presence or frequency penalty applies: the window is kept
  bool argmax_only_;   // greedy, no bias, no penalty: Sample is an argmax over the logits
  std::vector<Candidate> candidates_;  // preallocated: n_vocab entries (none when argmax_only_)
  std::vector<float> probs_;
  std::vector<int32_t> counts_;        // occurrences of each token in the window (none unless penalized_)
  std::deque<int32_t> window_;
};

}  // namespace gemlet
