// Sampler implementation. The chain follows HF transformers' order: penalties, temperature, top-k,
// top-p, min-p, then a draw.
#include "sampling/sampler.h"

#include <algorithm>
#include <cmath>

namespace gemlet {

std::string ValidateSampling(const SamplingOptions& o) {
  if (!std::isfinite(o.temperature) || o.temperature < 0) return "temperature must be >= 0";
  if (!std::isfinite(o.top_p) || o.top_p <= 0 || o.top_p > 1) return "top-p must be in (0, 1]";
  if (!std::isfinite(o.min_p) || o.min_p < 0 || o.min_p > 1) return "min-p must be in [0, 1]";
  if (!std::isfinite(o.repeat_penalty) || o.repeat_penalty <= 0) return "repeat penalty must be > 0";
  if (!std::isfinite(o.presence_penalty) || !std::isfinite(o.frequency_penalty)) return "penalties must be finite";
  if (o.repeat_last_n < 0) return "penalty window must be >= 0";
  for (const auto& [id, bias] : o.logit_bias) {
    if (!std::isfinite(bias) || bias < -100 || bias > 100) return "logit bias values must be in [-100, 100]";
  }
  return "";
}

Pcg32::Pcg32(uint64_t seed) : inc_((seed << 1u) | 1u) {
  Next();
  state_ += seed ^ 0x853c49e6748fea9bULL;
  Next();
}

uint32_t Pcg32::Next() {
  const uint64_t old = state_;
  state_ = old * 6364136223846793005ULL + inc_;
  const uint32_t xorshifted = static_cast<uint32_t>(((old >> 18u) ^ old) >> 27u);
  const uint32_t rot = static_cast<uint32_t>(old >> 59u);
  return (xorshifted >> rot) | (xorshifted << ((32 - rot) & 31));
}

double Pcg32::NextUnit() {
  const uint64_t hi = Next() >> 5, lo = Next() >> 6;  // 27 + 26 bits
  return (static_cast<double>(hi) * 67108864.0 + static_cast<double>(lo)) / 9007199254740992.0;
}

namespace {

// The index of the first of the highest values, skipping NaN unless it comes first (what a running
// "greater than the best so far" picks). The maximum is taken in independent lanes (each lane's
// "v > m ? v : m" is one vector max instruction, NaN kept out), then found from the start: two
// streaming passes instead of one serial chain through the whole vocabulary.
int FirstArgmax(const float* x, int n) {
  constexpr int kLanes = 16;
  float m[kLanes];
  for (float& v : m) v = x[0];
  const int whole = n - n % kLanes;
  for (int i = 0; i < whole; i += kLanes) {
    for (int j = 0; j < kLanes; ++j) m[j] = x[i + j] > m[j] ? x[i + j] : m[j];
  }
  float best = x[0];
  for (int j = 0; j < kLanes; ++j) best = m[j] > best ? m[j] : best;
  for (int i = whole; i < n; ++i) best = x[i] > best ? x[i] : best;
  if (!(best == best)) return 0;  // x[0] is NaN and nothing is greater than it
  for (int i = 0; i < n; ++i) {
    if (x[i] == best) return i;
  }
  return 0;
}

}  // namespace

Sampler::Sampler(const SamplingOptions& params, int n_vocab)
    : params_(params),
      n_vocab_(n_vocab),
      rng_(params.seed),
      penalized_(params.repeat_penalty != 1.0f || params.presence_penalty != 0 || params.frequency_penalty != 0),
      argmax_only_((params.temperature <= 0 || params.top_k == 1) && params.logit_bias.empty() && !penalized_) {
  // Greedy decoding without bias or penalties reads the logits as they are: with a 262k vocabulary
  // the candidate list alone is 2 MiB, allocated and touched per request for nothing.
  if (!argmax_only_) {
    candidates_.resize(static_cast<size_t>(n_vocab));
    probs_.resize(static_cast<size_t>(n_vocab));
  }
  if (penalized_) counts_.resize(static_cast<size_t>(n_vocab));
}

void Sampler::Reset() {
  rng_ = Pcg32(params_.seed);
  ClearWindow();
}

void Sampler::ClearWindow() {
  window_.clear();
  std::fill(counts_.begin(), counts_.end(), 0);
}

void Sampler::Accept(int32_t token) {
  // The window serves the penalties alone.
  if (!penalized_ || params_.repeat_last_n == 0 || token < 0 || token >= n_vocab_) return;
  window_.push_back(token);
  ++counts_[token];
  if (static_cast<int>(window_.size()) > params_.repeat_last_n) {
    --counts_[window_.front()];
    window_.pop_front();
  }
}

// OpenAI's rule: -100 bans the token. A bias is added, so the order of pairs does not matter; a
// ban is a logit so low that no draw reaches it, yet finite, so that a fully banned row still
// normalises.
void Sampler::ApplyBias() {
  constexpr float kBanned = -1e30f;
  for (const auto& [id, bias] : params_.logit_bias) {
    if (id < 0 || id >= n_vocab_) continue;
    float& logit = candidates_[static_cast<size_t>(id)].logit;
    logit = bias <= -100.0f ? kBanned : logit + bias;
  }
}

void Sampler::ApplyPenalties() {
  if (!penalized_) return;
  for (Candidate& c : candidates_) {
    const int count = counts_[c.id];
    if (count == 0) continue;
    if (c.logit > 0) c.logit /= params_.repeat_penalty;
    else c.logit *= params_.repeat_penalty;
    c.logit -= params_.presence_penalty + params_.frequency_penalty * static_cast<float>(count);
  }
}

int Sampler::Sample(const float* logits) {
  if (argmax_only_) {
    // The first of the highest logits: what the min_element below picks (it never prefers a later
    // equal one), without copying n_vocab candidates first. llama.cpp's greedy is an argmax too.
    return FirstArgmax(logits, n_vocab_);
  }
  candidates_.resize(static_cast<size_t>(n_vocab_));
  for (int i = 0; i < n_vocab_; ++i) candidates_[i] = {logits[i], i};
  ApplyBias();
  ApplyPenalties();
  auto by_logit = [](const Candidate& a, const Candidate& b) { return a.logit > b.logit || (a.logit == b.logit && a.id < b.id); };

  if (params_.temperature <= 0 || params_.top_k == 1) {
    return std::min_element(candidates_.begin(), candidates_.end(), by_logit)->id;
  }
  // Temperature, then top-k: keep the k best, sorted.
  size_t n = candidates_.size();
  if (params_.top_k > 0 && static_cast<size_t>(params_.top_k) < n) {
    std::partial_sort(candidates_.begin(), candidates_.begin() + params_.top_k, candidates_.end(), by_logit);
    n = static_cast<size_t>(params_.top_k);
  } else {
    std::sort(candidates_.begin(), candidates_.end(), by_logit);
  }
  const float inv_t = 1.0f / params_.temperature;
  const float max_logit = candidates_[0].logit;
  double total = 0;
  for (size_t i = 0; i < n; ++i) {
    probs_[i] = std::exp((candidates_[i].logit - max_logit) * inv_t);
    total += probs_[i];
  }
  // Top-p: the smallest prefix whose probability reaches p (always at least one token).
  if (params_.top_p < 1.0f) {
    double cumulative = 0;
    size_t keep = n;
    for (size_t i = 0; i < n; ++i) {
      cumulative += probs_[i] / total;
      if (cumulative >= params_.top_p) {
        keep = i + 1;
        break;
      }
    }
    n = keep;
  }
  // Min-p: drop tokens less likely than min_p times the most likely one.
  if (params_.min_p > 0) {
    size_t keep = 1;
    while (keep < n && probs_[keep] >= params_.min_p * probs_[0]) ++keep;
    n = keep;
  }
  double kept = 0;
  for (size_t i = 0; i < n; ++i) kept += probs_[i];
  double r = rng_.NextUnit() * kept;
  for (size_t i = 0; i < n; ++i) {
    r -= probs_[i];
    if (r < 0) return candidates_[i].id;
  }
  return candidates_[n - 1].id;
}

}  // namespace gemlet
