// Grammar: a context-free grammar over bytes (terminals are byte sets and JSON string bodies), built
// with GrammarBuilder and analysed once (shortest completion of every position, no left recursion), so
// that GrammarMatcher can walk it a byte at a time.
#pragma once

#include <cstdint>
#include <limits>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace gemlet {

// One byte position of a grammar: which byte values it accepts.
struct ByteSet {
  uint64_t bits[4] = {0, 0, 0, 0};

  void Add(uint8_t b) { bits[b >> 6] |= uint64_t{1} << (b & 63); }
  void AddRange(uint8_t lo, uint8_t hi) {
    for (int b = lo; b <= hi; ++b) Add(static_cast<uint8_t>(b));
  }
  bool Has(uint8_t b) const { return (bits[b >> 6] >> (b & 63)) & 1; }
  void Union(const ByteSet& o) {
    for (int i = 0; i < 4; ++i) bits[i] |= o.bits[i];
  }
  bool operator==(const ByteSet&) const = default;
};

// A JSON string body: the characters after the opening quote, through the closing quote. A terminal of
// its own (not byte sets) because the matcher answers it from per-vocabulary tables instead of walking
// the token trie, and because counting characters in rules would take one rule per count.
struct StringSpec {
  uint32_t min_chars = 0;                                     // Unicode code points, escapes count as one
  uint32_t max_chars = std::numeric_limits<uint32_t>::max();  // max(): unbounded
  // Values the string may not take (object keys already listed by the schema). While the text still
  // spells the start of a longer one, escapes are not allowed, so that bytes and value agree.
  std::vector<std::string> excluded;
};

class Grammar {
 public:
  enum class Kind : uint8_t {
    kEnd,    // end of an alternative
    kBytes,  // one byte from byte_set(arg)
    kString, // a JSON string body string_spec(arg)
    kRule,   // rule arg
  };
  struct Element {
    Kind kind;
    uint32_t arg;
  };
  // A node of a StringSpec's excluded-values trie: the child for each next byte, and whether a value ends here.
  struct ExclusionNode {
    std::vector<std::pair<uint8_t, int32_t>> children;
    bool terminal = false;
  };
  static constexpr uint32_t kInfinite = std::numeric_limits<uint32_t>::max();

  // Elements of every alternative back to back, each alternative closed by a kEnd element.
  const std::vector<Element>& elements() const { return elements_; }
  const Element& element(uint32_t pos) const { return elements_[pos]; }
  // Start positions (into elements()) of the alternatives of rule r.
  const uint32_t* alternatives_begin(int r) const { return alternatives_.data() + rule_alt_begin_[r]; }
  const uint32_t* alternatives_end(int r) const { return alternatives_.data() + rule_alt_begin_[r + 1]; }
  int rule_count() const { return static_cast<int>(rule_names_.size()); }
  const std::string& rule_name(int r) const { return rule_names_[r]; }
  int root() const { return root_; }

  const ByteSet& byte_set(uint32_t i) const { return byte_sets_[i]; }
  const StringSpec& string_spec(uint32_t i) const { return string_specs_[i]; }
  // Root of string_spec(i)'s excluded-values trie in exclusion_nodes(), or -1 when it excludes nothing.
  int32_t exclusion_root(uint32_t i) const { return exclusion_roots_[i]; }
  const ExclusionNode& exclusion_node(int32_t n) const { return exclusion_nodes_[n]; }

  // Shortest number of bytes that completes the alternative from element `pos` on (pos included).
  uint32_t suffix_min(uint32_t pos) const { return suffix_min_[pos]; }
  // Shortest sentence of the whole grammar, in bytes.
  uint32_t min_length() const { return rule_min_[root_]; }
  uint32_t byte_set_count() const { return static_cast<uint32_t>(byte_sets_.size()); }
  uint32_t string_spec_count() const { return static_cast<uint32_t>(string_specs_.size()); }

  // A readable GBNF-like listing, for tests and debugging.
  std::string ToString() const;

 private:
  friend class GrammarBuilder;

  std::vector<Element> elements_;
  std::vector<uint32_t> alternatives_;
  std::vector<uint32_t> rule_alt_begin_;  // rule_count()+1 offsets into alternatives_
  std::vector<std::string> rule_names_;
  std::vector<ByteSet> byte_sets_;
  std::vector<StringSpec> string_specs_;
  std::vector<int32_t> exclusion_roots_;
  std::vector<ExclusionNode> exclusion_nodes_;
  std::vector<uint32_t> suffix_min_;
  std::vector<uint32_t> rule_min_;
  int root_ = 0;
};

// Builds a Grammar rule by rule. Rules may refer to rules added later (and to themselves), but not
// left-recursively: Build() refuses a rule that can reach itself without consuming a byte.
class GrammarBuilder {
 public:
  // One right-hand side under construction.
  class Sequence {
   public:
    Sequence& Literal(std::string_view bytes);  // one byte-set element per byte
    Sequence& Bytes(const ByteSet& set);
    Sequence& Ref(int rule);
    Sequence& String(StringSpec spec);  // a string body (the opening quote is the caller's)

   private:
    friend class GrammarBuilder;
    struct Symbol {
      Grammar::Kind kind;
      ByteSet set;       // kBytes
      int rule = -1;     // kRule
      int spec = -1;     // kString: index into pending_specs
    };
    std::vector<Symbol> symbols_;
    std::vector<StringSpec> pending_specs_;
  };

  int AddRule(std::string name);  // a rule with no alternatives yet; returns its id
  void AddAlternative(int rule, Sequence sequence);
  int rule_count() const { return static_cast<int>(rules_.size()); }

  // Checks the grammar, drops alternatives that can never finish, computes the shortest completions.
  // Fails when a rule has no finite expansion that is reachable from the root, or is left-recursive.
  Result<Grammar> Build(int root) &&;

 private:
  struct Rule {
    std::string name;
    std::vector<Sequence> alternatives;
  };
  // Build's steps.
  Status CheckReferences() const;
  static uint32_t SequenceMin(const Sequence& seq, const std::vector<uint32_t>& rule_min);
  std::vector<uint32_t> ShortestExpansions() const;
  Status CheckLeftRecursion(const std::vector<uint32_t>& rule_min) const;
  Grammar Flatten(int root, const std::vector<uint32_t>& rule_min);
  static void BuildExclusionTries(Grammar& g);

  std::vector<Rule> rules_;
};

}  // namespace gemlet
