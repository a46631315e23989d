// A test double, not a network (general.architecture "gemlet-scripted"): it plays back answers
// written into its file, token by token, so that tests can drive what no random-weight model emits
// by itself: Gemma 4's thought channel, tool calls, an answer after a tool's result.
//
// Its file holds a tokenizer (a real one: the chat template and special tokens come with it), some
// cues (token sequences after which the model speaks: "<|turn>model\n", "<tool_response|>") and
// answers. After the n-th cue of its context it plays answer n (cycling), then the end token. Cues
// are found left to right, the longest first, without overlaps, so that "<|turn>model\n" followed by
// an empty thought channel is one cue, not two. The context lives where a network's would, in the
// KV cache (each position's key row holds its token's bits), so sessions, prefix reuse, batching,
// context shifts and saved states work on it as on a real model.
#include <algorithm>
#include <cstring>

#include "model/families.h"

namespace gemlet {
namespace {

constexpr char kArch[] = "gemlet-scripted";
constexpr int kBits = 32;         // a key row: one value per bit of the token id
constexpr float kChosen = 30.0f;  // the scripted token's logit, 0 for the others: e^-30 leaves the rest ~1e-8

class ScriptedModel final : public Model {
 public:
  using Model::Model;

  Status Load() {
    const GgufFile& f = *gguf_;
    const std::string arch = kArch;
    config_.arch = arch;
    if (f.Has("general.name")) {
      ASSIGN_OR_RETURN(config_.name, f.GetString("general.name"));
    }
    const std::vector<std::string_view>* tokens = f.GetStringArray("tokenizer.ggml.tokens");
    if (tokens == nullptr || tokens->empty()) return Status::Error("a scripted model needs tokenizer.ggml.tokens");
    config_.n_vocab = static_cast<int>(tokens->size());
    ASSIGN_OR_RETURN(uint32_t n_ctx, f.GetU32Or(arch + ".context_length", 8192));
    config_.n_ctx_train = static_cast<int>(std::min<uint32_t>(n_ctx, 1u << 30));
    config_.n_layers = 1;
    config_.d_model = kBits;
    LayerConfig layer;
    layer.n_heads = layer.n_kv_heads = 1;
    layer.head_dim = layer.head_dim_v = layer.ffn_dim = kBits;
    config_.layers = {layer};

    ASSIGN_OR_RETURN(cues_, ReadSequences(f, arch + ".cue"));
    ASSIGN_OR_RETURN(answers_, ReadSequences(f, arch + ".answer"));
    if (cues_.empty() || answers_.empty()) return Status::Error("a scripted model needs at least one cue and one answer");
    for (const auto& cue : cues_) {
      if (cue.empty()) return Status::Error(arch + ".cue: an empty cue");
    }
    // Longest first: at a position where several cues start, the longest that matches wins.
    std::stable_sort(cues_.begin(), cues_.end(), [](const auto& a, const auto& b) { return a.size() > b.size(); });
    ASSIGN_OR_RETURN(uint32_t end, f.GetU32(arch + ".end_token_id"));
    end_token_ = static_cast<int32_t>(end);
    for (const auto* seq : {&cues_, &answers_}) {
      for (const auto& s : *seq) RETURN_IF_ERROR(CheckTokens(s.data(), static_cast<int>(s.size())));
    }
    return CheckTokens(&end_token_, 1);
  }

  // Keys hold token ids, not rotated vectors: a context shift moves them as they are.
  const std::vector<float>& KeyRope(int layer) const override {
    (void)layer;
    static const std::vector<float> none;
    return none;
  }

 protected:
  void RunStep(const ForwardStep& step, Workspace& ws, KernelContext& ctx) const override {
    (void)ws;
    (void)ctx;
    const int n_vocab = config_.n_vocab;
    std::vector<int32_t> context;
    float key[kBits], value[kBits] = {};
    for (size_t s = 0; s < step.seqs.size(); ++s) {
      const SequenceRows& seq = step.seqs[s];
      context.clear();
      for (int64_t pos = 0; pos < seq.pos0; ++pos) {
        seq.cache->LoadKey(0, pos, key);
        uint32_t id = 0;
        for (int b = 0; b < kBits; ++b) id |= (key[b] > 0.5f ? 1u : 0u) << b;
        context.push_back(static_cast<int32_t>(id));
      }
      for (int r = 0; r < seq.n; ++r) {
        const int32_t token = step.tokens[seq.row0 + r];
        for (int b = 0; b < kBits; ++b) key[b] = (static_cast<uint32_t>(token) >> b) & 1u ? 1.0f : 0.0f;
        seq.cache->Store(0, seq.pos0 + r, key, value);
        context.push_back(token);
        float* row = nullptr;
        if (step.logits != nullptr && step.all_logits) row = step.logits + static_cast<size_t>(seq.row0 + r) * n_vocab;
        if (step.logits != nullptr && !step.all_logits && r == seq.n - 1) row = step.logits + s * static_cast<size_t>(n_vocab);
        if (row == nullptr) continue;
        std::fill(row, row + n_vocab, 0.0f);
        row[NextToken(context)] = kChosen;
      }
    }
  }

 private:
  static Result<std::vector<std::vector<int32_t>>> ReadSequences(const GgufFile& f, const std::string& key) {
    ASSIGN_OR_RETURN(std::vector<int32_t> tokens, f.GetI32Array(key + "_tokens"));
    ASSIGN_OR_RETURN(std::vector<int32_t> lengths, f.GetI32Array(key + "_lengths"));
    std::vector<std::vector<int32_t>> out;
    size_t at = 0;
    for (int32_t n : lengths) {
      if (n < 0 || at + static_cast<size_t>(n) > tokens.size()) return Status::Error(key + "_lengths do not fit " + key + "_tokens");
      out.emplace_back(tokens.begin() + at, tokens.begin() + at + n);
      at += static_cast<size_t>(n);
    }
    if (at != tokens.size()) return Status::Error(key + "_lengths do not cover " + key + "_tokens");
    return out;
  }

  // What follows `context`: the next token of the answer its last cue calls for.
  int32_t NextToken(const std::vector<int32_t>& context) const {
    size_t n_cues = 0, answer_from = 0;
    for (size_t i = 0; i < context.size();) {
      const std::vector<int32_t>* found = nullptr;
      for (const auto& cue : cues_) {
        if (i + cue.size() <= context.size() && std::equal(cue.begin(), cue.end(), context.begin() + i)) {
          found = &cue;
          break;
        }
      }
      if (found == nullptr) {
        ++i;
        continue;
      }
      ++n_cues;
      i += found->size();
      answer_from = i;
    }
    if (n_cues == 0) return end_token_;
    const std::vector<int32_t>& answer = answers_[(n_cues - 1) % answers_.size()];
    const size_t k = context.size() - answer_from;
    return k < answer.size() ? answer[k] : end_token_;
  }

  std::vector<std::vector<int32_t>> cues_;
  std::vector<std::vector<int32_t>> answers_;
  int32_t end_token_ = 0;
};

}  // namespace

Result<std::unique_ptr<Model>> LoadScripted(std::shared_ptr<const GgufFile> gguf) {
  auto model = std::make_unique<ScriptedModel>(std::move(gguf));
  RETURN_IF_ERROR(model->Load());
  return std::unique_ptr<Model>(std::move(model));
}

}  // namespace gemlet
