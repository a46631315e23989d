// Sampler: turns a row of logits into the next token — penalties, temperature, top-k, top-p, min-p,
// and a seeded random draw that is reproducible on every platform.
#pragma once

#include <cstdint>
#include <deque>
#include <string>
#include <utility>
#include <vector>

namespace gemlet {

struct SamplingParams {
  float temperature = 0.8f;       // <= 0: greedy (argmax)
  int top_k = 64;                 // <= 0: off
  float top_p = 0.95f;            // >= 1: off
  float min_p = 0.0f;             // <= 0: off; keeps tokens with p >= min_p * p_max
  float repeat_penalty = 1.0f;    // 1: off; divides positive / multiplies negative logits of seen tokens
  float presence_penalty = 0.0f;  // subtracted once from every token seen in the window
  float frequency_penalty = 0.0f; // subtracted per occurrence in the window
  int penalty_last_n = 64;        // tokens the penalties look back over
  uint64_t seed = 0;              // same seed, same logits -> same tokens
  std::vector<std::pair<int32_t, float>> logit_bias;  // added to those logits first; -100 bans

  // Empty when valid, else what is wrong (for CLI and API errors).
  std::string Validate() const;
};

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
  Sampler(const SamplingParams& params, int n_vocab);

  // Picks the next token from logits [n_vocab] (not modified), given the tokens accepted so far.
  int Sample(const float* logits);
  // Records a token (prompt or generated) in the penalty window.
  void Accept(int32_t token);
  void Reset();        // window and random stream back to the start
  void ClearWindow();  // forget the penalty window only
  const SamplingParams& params() const { return params_; }

 private:
  struct Candidate {
    float logit;
    int32_t id;
  };
  void ApplyBias();
  void ApplyPenalties();

  SamplingParams params_;
  int n_vocab_;
  Pcg32 rng_;
  std::vector<Candidate> candidates_;  // preallocated: n_vocab entries
  std::vector<float> probs_;
  std::vector<int32_t> counts_;        // occurrences of each token in the window
  std::deque<int32_t> window_;
};

}  // namespace gemlet
