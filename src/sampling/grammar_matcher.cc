// GrammarMatcher: configurations over a shared frame stack, the trie walk that masks tokens, and the
// string fast path that answers from TokenVocabulary's per-state tables.
#include "sampling/grammar_matcher.h"

#include <algorithm>
#include <tuple>
#include <cstdio>
#include <limits>

namespace gemlet {
namespace {

using Kind = Grammar::Kind;

uint32_t SatAdd(uint32_t a, uint32_t b) {
  return (a > Grammar::kInfinite - b) ? Grammar::kInfinite : a + b;
}

uint32_t StringMin(const StringSpec& spec) { return SatAdd(spec.min_chars, 1); }

bool IsTerminal(Kind k) { return k == Kind::kBytes || k == Kind::kString; }

std::string Hex(std::string_view bytes) {
  std::string out;
  for (char c : bytes) {
    char buf[4];
    std::snprintf(buf, sizeof buf, "%02X", static_cast<uint8_t>(c));
    if (!out.empty()) out += ' ';
    out += buf;
  }
  return out;
}

}  // namespace

GrammarMatcher::GrammarMatcher(std::shared_ptr<const Grammar> grammar, std::shared_ptr<const TokenVocabulary> vocab)
    : grammar_(std::move(grammar)), vocab_(std::move(vocab)) {}

Result<GrammarMatcher> GrammarMatcher::Create(std::shared_ptr<const Grammar> grammar,
                                              std::shared_ptr<const TokenVocabulary> vocab) {
  if (!grammar || !vocab) return Status::Error(StatusCode::kInvalidArgument, "grammar matcher: no grammar or vocabulary");
  // The length guarantee finishes an output one byte (one token) at a time, so every terminal must
  // have some byte that is a token by itself.
  auto has_single = [&](const ByteSet& set) {
    for (int b = 0; b < 256; ++b) {
      if (set.Has(static_cast<uint8_t>(b)) && vocab->has_single_byte_token(static_cast<uint8_t>(b))) return true;
    }
    return false;
  };
  for (uint32_t i = 0; i < grammar->byte_set_count(); ++i) {
    if (!has_single(grammar->byte_set(i))) {
      return Status::Error("grammar matcher: the vocabulary has no single-byte token for a byte the grammar needs");
    }
  }
  if (grammar->string_spec_count() > 0) {
    // Finishing a string: a closing quote, a plain character or hex digit ('0'), and a continuation
    // byte from each range a multi-byte character may still need.
    ByteSet quote, zero;
    quote.Add('"');
    zero.Add('0');
    std::vector<ByteSet> needed = {quote, zero};
    for (auto [lo, hi] : {std::pair{0x80, 0xBF}, {0xA0, 0xBF}, {0x80, 0x9F}, {0x90, 0xBF}, {0x80, 0x8F}}) {
      ByteSet s;
      s.AddRange(static_cast<uint8_t>(lo), static_cast<uint8_t>(hi));
      needed.push_back(s);
    }
    for (const ByteSet& s : needed) {
      if (!has_single(s)) {
        return Status::Error("grammar matcher: the vocabulary lacks the single-byte tokens that finish a JSON string");
      }
    }
  }
  GrammarMatcher m(std::move(grammar), std::move(vocab));
  m.lex_next_.resize(json_string::kNumStates);
  for (uint8_t q = 0; q < json_string::kNumStates; ++q) {
    for (int b = 0; b < 256; ++b) {
      if (json_string::Next(q, static_cast<uint8_t>(b)) != json_string::kInvalid) m.lex_next_[q].Add(static_cast<uint8_t>(b));
    }
  }
  m.allowed_.assign((m.vocab_->size() + 63) / 64, 0);
  m.levels_.resize(m.vocab_->trie().max_depth + 1);
  m.Reset();
  m.min_tokens_ = static_cast<int>(std::min<uint32_t>(m.MinCost(m.configs_), INT_MAX));
  return m;
}

void GrammarMatcher::Reset() {
  frames_.clear();
  configs_.clear();
  const Grammar& g = *grammar_;
  for (const uint32_t* alt = g.alternatives_begin(g.root()); alt != g.alternatives_end(g.root()); ++alt) {
    Expand(*alt, kNoFrame, &configs_);
  }
  Dedup(&configs_);
  Compact();
  finished_ = false;
  remaining_ = kUnlimited;
  allowed_valid_ = false;
  budget_exceeded_ = false;
}

uint32_t GrammarMatcher::NewFrame(uint32_t pos, uint32_t parent) {
  const uint32_t below = parent == kNoFrame ? 0 : frames_[parent].cost;
  frames_.push_back(Frame{pos, parent, SatAdd(grammar_->suffix_min(pos), below)});
  return static_cast<uint32_t>(frames_.size() - 1);
}

GrammarMatcher::Config GrammarMatcher::StartConfig(uint32_t frame) const {
  const Grammar::Element& e = grammar_->element(frames_[frame].pos);
  const int32_t excl = e.kind == Kind::kString ? grammar_->exclusion_root(e.arg) : -1;
  return Config{frame, 0, excl, json_string::kNormal};
}

// Iterative (an explicit work list), so that a long chain of optional properties or nested rules
// cannot run the thread out of stack.
void GrammarMatcher::Expand(uint32_t start_pos, uint32_t start_parent, std::vector<Config>* out) {
  const Grammar& g = *grammar_;
  work_.clear();
  work_.push_back({start_pos, start_parent});
  while (!work_.empty()) {
    auto [pos, parent] = work_.back();
    work_.pop_back();
    for (bool more = true; more;) {
      more = false;
      const Grammar::Element e = g.element(pos);
      switch (e.kind) {
        case Kind::kEnd: {
          if (parent == kNoFrame) {
            out->push_back(Config{kNoFrame, 0, -1, json_string::kNormal});
            break;
          }
          const Frame f = frames_[parent];
          // The parent resumes where it stopped; when that is a terminal, its frame is the new top as is.
          if (IsTerminal(g.element(f.pos).kind)) {
            out->push_back(StartConfig(parent));
            break;
          }
          pos = f.pos;
          parent = f.parent;
          more = true;
          break;
        }
        case Kind::kBytes:
        case Kind::kString:
          out->push_back(StartConfig(NewFrame(pos, parent)));
          break;
        case Kind::kRule: {
          // A call in tail position needs no frame of its own: the rule returns straight to `parent`.
          const uint32_t below = g.element(pos + 1).kind == Kind::kEnd ? parent : NewFrame(pos + 1, parent);
          // In reverse, so that alternatives come out in the grammar's order.
          for (const uint32_t* alt = g.alternatives_end(e.arg); alt-- != g.alternatives_begin(e.arg);) {
            work_.push_back({*alt, below});
          }
          break;
        }
      }
    }
  }
}

void GrammarMatcher::Advance(uint32_t frame, std::vector<Config>* out) {
  const Frame f = frames_[frame];
  Expand(f.pos + 1, f.parent, out);
}

void GrammarMatcher::Step(const Config& c, uint8_t byte, std::vector<Config>* out) {
  if (c.frame == kNoFrame) return;  // complete: nothing may follow
  const Grammar& g = *grammar_;
  const Grammar::Element e = g.element(frames_[c.frame].pos);
  if (e.kind == Kind::kBytes) {
    if (g.byte_set(e.arg).Has(byte)) Advance(c.frame, out);
    return;
  }
  const uint8_t next = json_string::Next(c.lex, byte);
  if (next == json_string::kInvalid) return;
  const StringSpec& spec = g.string_spec(e.arg);
  if (next == json_string::kClosed) {
    if (c.chars < spec.min_chars) return;
    if (c.excl >= 0 && g.exclusion_node(c.excl).terminal) return;
    Advance(c.frame, out);
    return;
  }
  Config n = c;
  n.lex = next;
  if (c.lex == json_string::kNormal) {
    if (c.chars >= spec.max_chars) return;
    ++n.chars;
  }
  if (c.excl >= 0) {
    // Still spelling an excluded value: bytes are the value only without escapes, so an escape may
    // come only where no excluded value goes on (then any character leaves them all behind).
    const Grammar::ExclusionNode& node = g.exclusion_node(c.excl);
    if (byte == '\\' && !node.children.empty()) return;
    n.excl = -1;
    for (const auto& [b, child] : node.children) {
      if (b == byte) n.excl = child;
    }
  }
  out->push_back(n);
}

void GrammarMatcher::StepAll(const std::vector<Config>& in, uint8_t byte, std::vector<Config>* out) {
  out->clear();
  for (const Config& c : in) Step(c, byte, out);
  if (out->size() > 1) Dedup(out);
  if (out->size() > kMaxConfigs) Prune(out);
}

// A pathologically ambiguous grammar (anyOf of look-alike recursive branches) can double its parses
// at every level; they differ only deep in their stacks. The bound is far above what real schemas
// reach (one parse per optional property or anyOf branch at a key or value start). Every configuration is a valid parse, so
// keeping some keeps the output valid. Kept first: the cheapest of each distinct top (so every byte
// that could come next still can, and the shortest completion, hence the budget guarantee, stays);
// then the cheapest of the rest.
void GrammarMatcher::Prune(std::vector<Config>* configs) const {
  auto top = [&](const Config& c) {
    return std::tuple(c.frame == kNoFrame ? kNoFrame : frames_[c.frame].pos, c.lex, c.chars, c.excl);
  };
  std::vector<Config>& v = *configs;
  std::sort(v.begin(), v.end(), [&](const Config& a, const Config& b) {
    const auto ta = top(a), tb = top(b);
    return ta != tb ? ta < tb : Cost(a) < Cost(b);
  });
  std::vector<Config> firsts, rest;
  for (size_t i = 0; i < v.size(); ++i) (i == 0 || top(v[i]) != top(v[i - 1]) ? firsts : rest).push_back(v[i]);
  auto by_cost = [&](const Config& a, const Config& b) { return Cost(a) < Cost(b); };
  if (firsts.size() >= kMaxConfigs) {
    std::nth_element(firsts.begin(), firsts.begin() + kMaxConfigs, firsts.end(), by_cost);
    firsts.resize(kMaxConfigs);
  } else {
    const size_t room = kMaxConfigs - firsts.size();
    if (rest.size() > room) {
      std::nth_element(rest.begin(), rest.begin() + room, rest.end(), by_cost);
      rest.resize(room);
    }
    firsts.insert(firsts.end(), rest.begin(), rest.end());
  }
  v = std::move(firsts);
}

bool GrammarMatcher::SameStack(uint32_t a, uint32_t b) const {
  while (a != b) {
    if (a == kNoFrame || b == kNoFrame || frames_[a].pos != frames_[b].pos) return false;
    a = frames_[a].parent;
    b = frames_[b].parent;
  }
  return true;
}

// Ambiguous grammars (a number that is also an integer) parse the same text several ways; identical
// configurations would only multiply the work.
void GrammarMatcher::Dedup(std::vector<Config>* configs) const {
  size_t kept = 0;
  for (size_t i = 0; i < configs->size(); ++i) {
    const Config& c = (*configs)[i];
    bool seen = false;
    for (size_t j = 0; j < kept && !seen; ++j) {
      const Config& d = (*configs)[j];
      seen = c.lex == d.lex && c.chars == d.chars && c.excl == d.excl && SameStack(c.frame, d.frame);
    }
    if (!seen) (*configs)[kept++] = c;
  }
  configs->resize(kept);
}

uint32_t GrammarMatcher::Cost(const Config& c) const {
  if (c.frame == kNoFrame) return 0;
  const Frame& f = frames_[c.frame];
  const Grammar::Element& e = grammar_->element(f.pos);
  if (e.kind != Kind::kString) return f.cost;
  // Inside a string body: finish the character, reach min_chars, close.
  const StringSpec& spec = grammar_->string_spec(e.arg);
  uint32_t chars_needed = spec.min_chars > c.chars ? spec.min_chars - c.chars : 0;
  if (chars_needed == 0 && c.lex == json_string::kNormal && c.excl >= 0 && grammar_->exclusion_node(c.excl).terminal) {
    chars_needed = 1;  // spells an excluded value: one more character before the quote
  }
  const uint32_t rest = SatAdd(json_string::kPendingBytes[c.lex], SatAdd(chars_needed, 1));
  return SatAdd(f.cost - StringMin(spec), rest);
}

uint32_t GrammarMatcher::MinCost(const std::vector<Config>& configs) const {
  uint32_t best = Grammar::kInfinite;
  for (const Config& c : configs) best = std::min(best, Cost(c));
  return best;
}

ByteSet GrammarMatcher::NextBytes(const std::vector<Config>& configs) const {
  ByteSet out;
  for (const Config& c : configs) {
    if (c.frame == kNoFrame) continue;
    const Grammar::Element& e = grammar_->element(frames_[c.frame].pos);
    out.Union(e.kind == Kind::kBytes ? grammar_->byte_set(e.arg) : lex_next_[c.lex]);
  }
  return out;
}

// Keeps only the frames the current configurations use. A parent is always older than its children,
// so one ascending pass renumbers them.
void GrammarMatcher::Compact() {
  remap_.assign(frames_.size(), kNoFrame);
  for (const Config& c : configs_) {
    for (uint32_t f = c.frame; f != kNoFrame && remap_[f] == kNoFrame; f = frames_[f].parent) remap_[f] = 0;
  }
  uint32_t kept = 0;
  for (uint32_t i = 0; i < frames_.size(); ++i) {
    if (remap_[i] == kNoFrame) continue;
    Frame f = frames_[i];
    if (f.parent != kNoFrame) f.parent = remap_[f.parent];
    remap_[i] = kept;
    frames_[kept++] = f;
  }
  frames_.resize(kept);
  for (Config& c : configs_) {
    if (c.frame != kNoFrame) c.frame = remap_[c.frame];
  }
}

int GrammarMatcher::remaining_min_tokens() const {
  if (finished_) return 0;
  return static_cast<int>(std::min<uint32_t>(MinCost(configs_), INT_MAX));
}

void GrammarMatcher::SetRemainingTokens(int n) {
  if (n != remaining_) allowed_valid_ = false;
  remaining_ = n;
}

bool GrammarMatcher::complete() const {
  if (finished_) return false;
  for (const Config& c : configs_) {
    if (c.frame == kNoFrame) return true;
  }
  return false;
}

bool GrammarMatcher::must_end() const {
  if (finished_) return true;
  for (const Config& c : configs_) {
    if (c.frame != kNoFrame) return false;
  }
  return true;
}

Status GrammarMatcher::StepToken(int32_t token) {
  if (token < 0 || token >= vocab_->size()) {
    return Status::Error(StatusCode::kInvalidArgument, "grammar: token " + std::to_string(token) + " is outside the vocabulary");
  }
  if (finished_) return Status::Error(StatusCode::kInvalidArgument, "grammar: the output has already ended");
  if (vocab_->is_excluded(token)) {
    return Status::Error("grammar: special token " + std::to_string(token) + " cannot appear in the output");
  }
  const std::string_view bytes = vocab_->bytes(token);
  tmp_a_ = configs_;
  for (char ch : bytes) {
    StepAll(tmp_a_, static_cast<uint8_t>(ch), &tmp_b_);
    std::swap(tmp_a_, tmp_b_);
    if (tmp_a_.empty()) {
      return Status::Error("grammar: token " + std::to_string(token) + " (bytes " + Hex(bytes) +
                           ") cannot continue the output here");
    }
  }
  return Status::Ok();
}

Result<int> GrammarMatcher::ShortestCompletionAfter(int32_t token) {
  if (token >= 0 && token < vocab_->size() && vocab_->is_end(token) && !finished_) {
    if (!complete()) return Status::Error("grammar: end token " + std::to_string(token) + " before the output is complete");
    return 0;
  }
  const size_t live = frames_.size();
  const Status st = StepToken(token);
  const uint32_t cost = st.ok() ? MinCost(tmp_a_) : 0;
  frames_.resize(live);
  if (!st.ok()) return st;
  return static_cast<int>(std::min<uint32_t>(cost, INT_MAX));
}

Status GrammarMatcher::Accept(int32_t token) {
  if (token >= 0 && token < vocab_->size() && vocab_->is_end(token) && !finished_) {
    if (!complete()) return Status::Error("grammar: end token " + std::to_string(token) + " before the output is complete");
    finished_ = true;
    allowed_valid_ = false;
    return Status::Ok();
  }
  const size_t live = frames_.size();
  const Status st = StepToken(token);
  if (!st.ok()) {
    frames_.resize(live);
    return st;
  }
  std::swap(configs_, tmp_a_);
  Compact();
  allowed_valid_ = false;
  return Status::Ok();
}

void GrammarMatcher::Offer(int32_t token, uint32_t cost) {
  if (static_cast<int64_t>(cost) <= limit_) {
    allowed_[token >> 6] |= uint64_t{1} << (token & 63);
    any_allowed_ = true;
  } else {
    best_over_ = std::min(best_over_, cost);
  }
}

void GrammarMatcher::WalkTrie(const std::vector<Config>& configs, const ByteSet* first_bytes) {
  const TokenTrie& t = vocab_->trie();
  const size_t base = frames_.size();
  Level& root = levels_[0];
  root.configs = configs;
  root.frame_mark = base;
  root.next = NextBytes(configs);
  if (first_bytes) {
    for (int w = 0; w < 4; ++w) root.next.bits[w] &= first_bytes->bits[w];
  }
  for (uint32_t i = 1; i < t.size();) {
    const uint32_t d = t.depth[i];
    const uint8_t byte = t.byte[i];
    Level& up = levels_[d - 1];
    if (!up.next.Has(byte)) {
      i = t.skip[i];
      continue;
    }
    Level& cur = levels_[d];
    frames_.resize(up.frame_mark);
    StepAll(up.configs, byte, &cur.configs);
    if (cur.configs.empty()) {
      i = t.skip[i];
      continue;
    }
    cur.frame_mark = frames_.size();
    cur.cost = MinCost(cur.configs);
    if (t.skip[i] != i + 1) cur.next = NextBytes(cur.configs);
    for (uint32_t k = t.token_begin[i]; k < t.token_begin[i + 1]; ++k) Offer(t.tokens[k], cur.cost);
    ++i;
  }
  frames_.resize(base);
}

// A configuration inside a string body: tokens that stay inside come from the table's bitset (or, under
// a length bound or a tight budget, its per-token entries); only the few tokens holding the closing
// quote are stepped byte by byte past it. While the string still spells the start of an excluded
// value, tokens whose first byte follows that value are left to a trie walk over just those subtrees
// (a '\' may not come at all); every other token leaves the excluded values at its first byte, and
// the tables answer for it as for any string.
void GrammarMatcher::StringFastPath(const Config& c) {
  const Grammar& g = *grammar_;
  const Frame frame = frames_[c.frame];
  const StringSpec& spec = g.string_spec(g.element(frame.pos).arg);
  const StringTokenTable& table = vocab_->string_table(c.lex);
  const uint32_t after_string = frame.cost - StringMin(spec);  // cost of what follows the closing quote
  const uint64_t room = spec.max_chars - c.chars;               // characters the string may still take
  const uint32_t chars_needed = spec.min_chars > c.chars ? spec.min_chars - c.chars : 0;
  const Grammar::ExclusionNode* excl = c.excl >= 0 ? &g.exclusion_node(c.excl) : nullptr;
  ByteSet diverted;  // first bytes this path does not answer for
  if (excl) {
    for (const auto& [b, child] : excl->children) diverted.Add(b);
    if (!excl->children.empty()) diverted.Add('\\');
  }
  auto first_byte = [&](int32_t id) { return static_cast<uint8_t>(vocab_->bytes(id)[0]); };

  const bool length_ok = room >= table.max_inside_chars;
  const uint64_t worst = uint64_t{after_string} + json_string::kMaxPendingBytes + chars_needed + 1;
  if (length_ok && static_cast<int64_t>(worst) <= limit_) {
    // The diverted tokens keep whatever other configurations allowed them: save and restore them.
    const TokenTrie& t = vocab_->trie();
    saved_.clear();
    if (excl) {
      for (uint32_t i = 1; i < t.size(); i = t.skip[i]) {
        if (!diverted.Has(t.byte[i])) continue;
        for (uint32_t k = t.token_begin[i]; k < t.token_begin[t.skip[i]]; ++k) {
          const int32_t id = t.tokens[k];
          saved_.push_back({id, static_cast<bool>((allowed_[id >> 6] >> (id & 63)) & 1)});
        }
      }
    }
    const size_t words = table.inside.size();
    for (size_t w = 0; w < words; ++w) allowed_[w] |= table.inside[w];
    any_allowed_ = any_allowed_ || !table.inside_ids.empty();
    for (const auto& [id, bit] : saved_) {
      if (!bit) allowed_[id >> 6] &= ~(uint64_t{1} << (id & 63));
    }
  } else {
    const size_t n = table.inside_ids.size();
    for (size_t k = 0; k < n; ++k) {
      const uint32_t e = table.inside_entries[k];
      const uint32_t chars = StringTokenTable::Chars(e);
      if (chars > room) break;  // ordered by characters
      const int32_t id = table.inside_ids[k];
      if (excl && diverted.Has(first_byte(id))) continue;
      const uint32_t total = c.chars + chars;
      const uint32_t need = spec.min_chars > total ? spec.min_chars - total : 0;
      Offer(id, SatAdd(after_string, json_string::kPendingBytes[StringTokenTable::EndState(e)] + need + 1));
    }
  }

  // Tokens with the closing quote: the parse after the string, then the rest of the token's bytes.
  const size_t base = frames_.size();
  closing_.clear();
  Advance(c.frame, &closing_);
  const size_t closed_mark = frames_.size();
  for (const auto& [id, e] : table.closing) {
    const uint32_t chars = StringTokenTable::Chars(e);
    if (chars > room || c.chars + chars < spec.min_chars) continue;
    if (excl) {
      if (diverted.Has(first_byte(id))) continue;
      // A quote first closes the string on the excluded-value prefix itself.
      if (StringTokenTable::CloseOffset(e) == 1 && excl->terminal) continue;
    }
    const std::string_view bytes = vocab_->bytes(id);
    frames_.resize(closed_mark);
    const std::vector<Config>* cur = &closing_;
    bool alive = true;
    for (size_t i = StringTokenTable::CloseOffset(e); i < bytes.size() && alive; ++i) {
      std::vector<Config>* out = cur == &tmp_a_ ? &tmp_b_ : &tmp_a_;
      StepAll(*cur, static_cast<uint8_t>(bytes[i]), out);
      cur = out;
      alive = !out->empty();
    }
    if (alive) Offer(id, MinCost(*cur));
  }
  frames_.resize(base);

  if (excl) {
    diverted = ByteSet();
    for (const auto& [b, child] : excl->children) diverted.Add(b);
    walk_configs_.assign(1, c);
    WalkTrie(walk_configs_, &diverted);
    walk_configs_.clear();
  }
}

void GrammarMatcher::OfferAll() {
  std::fill(allowed_.begin(), allowed_.end(), 0);
  any_allowed_ = false;
  // String configurations first: their fast path may walk the trie with walk_configs_ itself.
  for (const Config& c : configs_) {
    if (c.frame != kNoFrame && grammar_->element(frames_[c.frame].pos).kind == Kind::kString) StringFastPath(c);
  }
  walk_configs_.clear();
  for (const Config& c : configs_) {
    if (c.frame != kNoFrame && grammar_->element(frames_[c.frame].pos).kind != Kind::kString) walk_configs_.push_back(c);
  }
  if (!walk_configs_.empty()) WalkTrie(walk_configs_, nullptr);
}

void GrammarMatcher::ComputeAllowed() {
  budget_exceeded_ = false;
  best_over_ = Grammar::kInfinite;
  limit_ = static_cast<int64_t>(remaining_) - 1;
  if (finished_) {
    std::fill(allowed_.begin(), allowed_.end(), 0);
  } else {
    OfferAll();
    if (complete()) {
      any_allowed_ = true;
    } else if (!any_allowed_ && best_over_ != Grammar::kInfinite) {
      // No token leaves a completion within the budget (it was below min_tokens()): allow the ones
      // that leave the shortest, found by offering again with that as the limit.
      budget_exceeded_ = true;
      limit_ = best_over_;
      OfferAll();
    }
  }
  if (finished_ || complete()) {
    for (int32_t id : vocab_->end_tokens()) allowed_[id >> 6] |= uint64_t{1} << (id & 63);
  }
  allowed_valid_ = true;
}

const std::vector<uint64_t>& GrammarMatcher::AllowedTokens() {
  if (!allowed_valid_) ComputeAllowed();
  return allowed_;
}

bool GrammarMatcher::IsAllowed(int32_t token) {
  if (token < 0 || token >= vocab_->size()) return false;
  const std::vector<uint64_t>& a = AllowedTokens();
  return (a[token >> 6] >> (token & 63)) & 1;
}

void GrammarMatcher::Mask(float* logits, size_t n_logits) {
  const std::vector<uint64_t>& a = AllowedTokens();
  constexpr float kMasked = -std::numeric_limits<float>::infinity();
  const size_t n_vocab = static_cast<size_t>(vocab_->size());
  const size_t n = std::min(n_logits, n_vocab);
  for (size_t base = 0; base < n; base += 64) {
    const uint64_t word = a[base >> 6];
    const size_t end = std::min(n, base + 64);
    if (word == ~uint64_t{0} && end == base + 64) continue;
    for (size_t i = base; i < end; ++i) {
      if (!((word >> (i - base)) & 1)) logits[i] = kMasked;
    }
  }
  for (size_t i = n; i < n_logits; ++i) logits[i] = kMasked;
}

}  // namespace gemlet
