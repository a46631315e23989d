// GrammarBuilder::Build (shortest completions, dead alternatives, left recursion) and Grammar::ToString.
#include "sampling/grammar.h"

#include <algorithm>
#include <cstdio>

namespace gemlet {
namespace {

uint32_t SatAdd(uint32_t a, uint32_t b) {
  return (a == Grammar::kInfinite || b == Grammar::kInfinite || a > Grammar::kInfinite - b) ? Grammar::kInfinite
                                                                                              : a + b;
}

// Shortest bytes of one string body: min_chars one-byte characters and the closing quote.
uint32_t StringMin(const StringSpec& spec) { return SatAdd(spec.min_chars, 1); }

std::string ShowByte(uint8_t b) {
  if (b == '\\' || b == '\'' || b == '-' || b == ']') return std::string("\\") + static_cast<char>(b);
  if (b >= 0x21 && b < 0x7F) return std::string(1, static_cast<char>(b));
  char buf[8];
  std::snprintf(buf, sizeof buf, "\\x%02X", b);
  return buf;
}

}  // namespace

GrammarBuilder::Sequence& GrammarBuilder::Sequence::Literal(std::string_view bytes) {
  for (char c : bytes) {
    Symbol s{Grammar::Kind::kBytes, {}, -1, -1};
    s.set.Add(static_cast<uint8_t>(c));
    symbols_.push_back(s);
  }
  return *this;
}

GrammarBuilder::Sequence& GrammarBuilder::Sequence::Bytes(const ByteSet& set) {
  symbols_.push_back(Symbol{Grammar::Kind::kBytes, set, -1, -1});
  return *this;
}

GrammarBuilder::Sequence& GrammarBuilder::Sequence::Ref(int rule) {
  symbols_.push_back(Symbol{Grammar::Kind::kRule, {}, rule, -1});
  return *this;
}

GrammarBuilder::Sequence& GrammarBuilder::Sequence::String(StringSpec spec) {
  pending_specs_.push_back(std::move(spec));
  symbols_.push_back(Symbol{Grammar::Kind::kString, {}, -1, static_cast<int>(pending_specs_.size()) - 1});
  return *this;
}

int GrammarBuilder::AddRule(std::string name) {
  rules_.push_back(Rule{std::move(name), {}});
  return static_cast<int>(rules_.size()) - 1;
}

void GrammarBuilder::AddAlternative(int rule, Sequence sequence) {
  rules_[rule].alternatives.push_back(std::move(sequence));
}

Result<Grammar> GrammarBuilder::Build(int root) && {
  const int n = static_cast<int>(rules_.size());
  if (root < 0 || root >= n) return Status::Error(StatusCode::kInvalidArgument, "grammar: no root rule");
  RETURN_IF_ERROR(CheckReferences());
  const std::vector<uint32_t> rule_min = ShortestExpansions();
  if (rule_min[root] == Grammar::kInfinite) {
    return Status::Error("rule '" + rules_[root].name +
                         "' has no finite expansion (every sentence would be infinitely long, such as an object "
                         "that requires a property holding the same object)");
  }
  // An alternative that can never finish would let sampling wander into a dead end.
  for (Rule& rule : rules_) {
    std::erase_if(rule.alternatives,
                  [&](const Sequence& seq) { return SequenceMin(seq, rule_min) == Grammar::kInfinite; });
  }
  RETURN_IF_ERROR(CheckLeftRecursion(rule_min));
  Grammar g = Flatten(root, rule_min);
  BuildExclusionTries(g);
  return g;
}

Status GrammarBuilder::CheckReferences() const {
  const int n = static_cast<int>(rules_.size());
  for (const Rule& rule : rules_) {
    for (const Sequence& seq : rule.alternatives) {
      for (const Sequence::Symbol& s : seq.symbols_) {
        if (s.kind == Grammar::Kind::kRule && (s.rule < 0 || s.rule >= n)) {
          return Status::Error(StatusCode::kInvalidArgument, "grammar: rule '" + rule.name + "' refers to no rule");
        }
      }
    }
  }
  return Status::Ok();
}

uint32_t GrammarBuilder::SequenceMin(const Sequence& seq, const std::vector<uint32_t>& rule_min) {
  uint32_t total = 0;
  for (const Sequence::Symbol& s : seq.symbols_) {
    uint32_t own = 0;
    switch (s.kind) {
      case Grammar::Kind::kBytes: own = 1; break;
      case Grammar::Kind::kString: own = StringMin(seq.pending_specs_[s.spec]); break;
      case Grammar::Kind::kRule: own = rule_min[s.rule]; break;
      case Grammar::Kind::kEnd: break;
    }
    total = SatAdd(total, own);
  }
  return total;
}

// Shortest expansion of every rule: the least fixed point, iterated from infinity.
std::vector<uint32_t> GrammarBuilder::ShortestExpansions() const {
  const int n = static_cast<int>(rules_.size());
  std::vector<uint32_t> rule_min(n, Grammar::kInfinite);
  for (bool changed = true; changed;) {
    changed = false;
    // Later rules are usually the tails of earlier ones (counted repetitions), so go backwards.
    for (int r = n - 1; r >= 0; --r) {
      uint32_t best = rule_min[r];
      for (const Sequence& seq : rules_[r].alternatives) best = std::min(best, SequenceMin(seq, rule_min));
      if (best < rule_min[r]) {
        rule_min[r] = best;
        changed = true;
      }
    }
  }
  return rule_min;
}

// Left recursion (a rule reaching itself before consuming a byte) would expand forever.
Status GrammarBuilder::CheckLeftRecursion(const std::vector<uint32_t>& rule_min) const {
  const int n = static_cast<int>(rules_.size());
  std::vector<std::vector<int>> first_refs(n);
  for (int r = 0; r < n; ++r) {
    for (const Sequence& seq : rules_[r].alternatives) {
      for (const Sequence::Symbol& s : seq.symbols_) {
        if (s.kind != Grammar::Kind::kRule) break;
        first_refs[r].push_back(s.rule);
        if (rule_min[s.rule] != 0) break;
      }
    }
  }
  std::vector<uint8_t> color(n, 0);  // 0 unseen, 1 on the DFS path, 2 done
  for (int start = 0; start < n; ++start) {
    if (color[start]) continue;
    std::vector<std::pair<int, size_t>> stack{{start, 0}};
    color[start] = 1;
    while (!stack.empty()) {
      auto& [r, next] = stack.back();
      if (next == first_refs[r].size()) {
        color[r] = 2;
        stack.pop_back();
        continue;
      }
      const int s = first_refs[r][next++];
      if (color[s] == 1) {
        return Status::Error("rule '" + rules_[s].name +
                             "' is left-recursive (it can reach itself before writing a byte, such as a $ref cycle)");
      }
      if (color[s] == 0) {
        color[s] = 1;
        stack.push_back({s, 0});
      }
    }
  }

  return Status::Ok();
}

// The rules as the flat arrays the matcher walks, with each position's shortest completion.
Grammar GrammarBuilder::Flatten(int root, const std::vector<uint32_t>& rule_min) {
  Grammar g;
  g.root_ = root;
  g.rule_min_ = rule_min;
  g.rule_alt_begin_.push_back(0);
  for (Rule& rule : rules_) {
    g.rule_names_.push_back(rule.name);
    for (Sequence& seq : rule.alternatives) {
      g.alternatives_.push_back(static_cast<uint32_t>(g.elements_.size()));
      for (Sequence::Symbol& s : seq.symbols_) {
        uint32_t arg = 0;
        if (s.kind == Grammar::Kind::kBytes) {
          auto it = std::find(g.byte_sets_.begin(), g.byte_sets_.end(), s.set);
          arg = static_cast<uint32_t>(it - g.byte_sets_.begin());
          if (it == g.byte_sets_.end()) g.byte_sets_.push_back(s.set);
        } else if (s.kind == Grammar::Kind::kString) {
          arg = static_cast<uint32_t>(g.string_specs_.size());
          g.string_specs_.push_back(std::move(seq.pending_specs_[s.spec]));
        } else {
          arg = static_cast<uint32_t>(s.rule);
        }
        g.elements_.push_back(Grammar::Element{s.kind, arg});
        g.suffix_min_.push_back(0);
      }
      g.elements_.push_back(Grammar::Element{Grammar::Kind::kEnd, 0});
      g.suffix_min_.push_back(0);
    }
    g.rule_alt_begin_.push_back(static_cast<uint32_t>(g.alternatives_.size()));
  }
  // suffix_min: walk each alternative backwards from its kEnd.
  for (size_t pos = g.elements_.size(); pos-- > 0;) {
    const Grammar::Element& e = g.elements_[pos];
    uint32_t own = 0;
    switch (e.kind) {
      case Grammar::Kind::kEnd: g.suffix_min_[pos] = 0; continue;
      case Grammar::Kind::kBytes: own = 1; break;
      case Grammar::Kind::kString: own = StringMin(g.string_specs_[e.arg]); break;
      case Grammar::Kind::kRule: own = g.rule_min_[e.arg]; break;
    }
    g.suffix_min_[pos] = SatAdd(own, g.suffix_min_[pos + 1]);
  }
  return g;
}

// Excluded-value tries, one per string body that has any.
void GrammarBuilder::BuildExclusionTries(Grammar& g) {
  for (const StringSpec& spec : g.string_specs_) {
    if (spec.excluded.empty()) {
      g.exclusion_roots_.push_back(-1);
      continue;
    }
    const int32_t root_node = static_cast<int32_t>(g.exclusion_nodes_.size());
    g.exclusion_roots_.push_back(root_node);
    g.exclusion_nodes_.emplace_back();
    for (const std::string& value : spec.excluded) {
      int32_t node = root_node;
      for (char c : value) {
        const uint8_t b = static_cast<uint8_t>(c);
        int32_t child = -1;
        for (const auto& [byte, id] : g.exclusion_nodes_[node].children) {
          if (byte == b) child = id;
        }
        if (child < 0) {
          child = static_cast<int32_t>(g.exclusion_nodes_.size());
          g.exclusion_nodes_[node].children.push_back({b, child});
          g.exclusion_nodes_.emplace_back();
        }
        node = child;
      }
      g.exclusion_nodes_[node].terminal = true;
    }
  }
}

std::string Grammar::ToString() const {
  std::string out;
  for (int r = 0; r < rule_count(); ++r) {
    out += rule_names_[r] + " ::=";
    for (const uint32_t* alt = alternatives_begin(r); alt != alternatives_end(r); ++alt) {
      if (alt != alternatives_begin(r)) out += " |";
      if (elements_[*alt].kind == Kind::kEnd) out += " \"\"";
      for (uint32_t pos = *alt; elements_[pos].kind != Kind::kEnd; ++pos) {
        const Element& e = elements_[pos];
        out += ' ';
        if (e.kind == Kind::kRule) {
          out += rule_names_[e.arg];
        } else if (e.kind == Kind::kString) {
          const StringSpec& s = string_specs_[e.arg];
          out += "STRING{" + std::to_string(s.min_chars) + "," +
                 (s.max_chars == kInfinite ? std::string() : std::to_string(s.max_chars)) + "}";
          if (!s.excluded.empty()) out.append("-").append(std::to_string(s.excluded.size()));
        } else {
          const ByteSet& set = byte_sets_[e.arg];
          std::string body;
          int count = 0;
          for (int b = 0; b < 256; ++b) {
            if (!set.Has(static_cast<uint8_t>(b))) continue;
            int hi = b;
            while (hi + 1 < 256 && set.Has(static_cast<uint8_t>(hi + 1))) ++hi;
            body += ShowByte(static_cast<uint8_t>(b));
            if (hi > b) body.append("-").append(ShowByte(static_cast<uint8_t>(hi)));
            count += hi - b + 1;
            b = hi;
          }
          out += count == 1 ? "'" + body + "'" : "[" + body + "]";
        }
      }
    }
    out += '\n';
  }
  return out;
}

}  // namespace gemlet
