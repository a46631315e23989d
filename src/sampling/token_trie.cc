// TokenVocabulary: the token byte trie and the lazily built JSON-string tables.
#include "sampling/token_trie.h"

#include <algorithm>
#include <numeric>

namespace gemlet {

Result<std::shared_ptr<const TokenVocabulary>> TokenVocabulary::Create(std::vector<std::string> token_bytes,
                                                                       std::vector<bool> special,
                                                                       std::vector<int32_t> end_tokens) {
  const size_t n = token_bytes.size();
  if (n == 0 || n > static_cast<size_t>(INT32_MAX)) {
    return Status::Error(StatusCode::kInvalidArgument, "token vocabulary: no tokens");
  }
  if (special.size() != n) {
    return Status::Error(StatusCode::kInvalidArgument, "token vocabulary: " + std::to_string(special.size()) +
                                                           " special flags for " + std::to_string(n) + " tokens");
  }
  if (end_tokens.empty()) {
    return Status::Error(StatusCode::kInvalidArgument, "token vocabulary: no end-of-generation token");
  }
  std::shared_ptr<TokenVocabulary> v(new TokenVocabulary());
  v->flags_.assign(n, 0);
  for (int32_t id : end_tokens) {
    if (id < 0 || static_cast<size_t>(id) >= n) {
      return Status::Error(StatusCode::kInvalidArgument, "token vocabulary: end token " + std::to_string(id) +
                                                             " is outside the vocabulary");
    }
    v->flags_[id] |= kEndFlag;
  }
  v->end_tokens_ = std::move(end_tokens);
  size_t total = 0;
  for (size_t i = 0; i < n; ++i) {
    if (token_bytes[i].size() > 0xFFFF) {
      return Status::Error(StatusCode::kInvalidArgument,
                           "token vocabulary: token " + std::to_string(i) + " is longer than 65535 bytes");
    }
    total += token_bytes[i].size();
    if (special[i]) v->flags_[i] |= kSpecialFlag;
    if (token_bytes[i].empty()) v->flags_[i] |= kEmptyFlag;
  }
  v->arena_.reserve(total);
  v->offsets_.reserve(n + 1);
  v->offsets_.push_back(0);
  for (size_t i = 0; i < n; ++i) {
    v->arena_ += token_bytes[i];
    v->offsets_.push_back(static_cast<uint32_t>(v->arena_.size()));
    if (v->flags_[i] == 0 && token_bytes[i].size() == 1) v->single_byte_[static_cast<uint8_t>(token_bytes[i][0])] = true;
  }
  token_bytes.clear();
  token_bytes.shrink_to_fit();

  // The trie from the sorted ordinary tokens: each token shares the nodes of its longest common
  // prefix with the one before it and adds the rest.
  std::vector<int32_t> order;
  order.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    if (v->flags_[i] == 0) order.push_back(static_cast<int32_t>(i));
  }
  std::sort(order.begin(), order.end(), [&](int32_t a, int32_t b) {
    const std::string_view x = v->bytes(a), y = v->bytes(b);
    return x != y ? x < y : a < b;
  });
  TokenTrie& t = v->trie_;
  t.byte.push_back(0);
  t.depth.push_back(0);
  t.token_begin.push_back(0);
  std::string_view prev;
  for (int32_t id : order) {
    const std::string_view s = v->bytes(id);
    size_t common = 0;
    while (common < s.size() && common < prev.size() && s[common] == prev[common]) ++common;
    for (size_t d = common; d < s.size(); ++d) {
      t.byte.push_back(static_cast<uint8_t>(s[d]));
      t.depth.push_back(static_cast<uint16_t>(d + 1));
      t.token_begin.push_back(static_cast<uint32_t>(t.tokens.size()));
    }
    // The token ends at the newest node: its own last byte, or the same node as an identical predecessor.
    t.tokens.push_back(id);
    t.max_depth = std::max<uint32_t>(t.max_depth, static_cast<uint32_t>(s.size()));
    prev = s;
  }
  t.token_begin.push_back(static_cast<uint32_t>(t.tokens.size()));
  // skip[i]: the next node whose depth is not below node i's.
  const uint32_t nodes = t.size();
  t.skip.assign(nodes, nodes);
  std::vector<uint32_t> open;
  for (uint32_t i = 0; i < nodes; ++i) {
    while (!open.empty() && t.depth[open.back()] >= t.depth[i]) {
      t.skip[open.back()] = i;
      open.pop_back();
    }
    open.push_back(i);
  }
  return std::shared_ptr<const TokenVocabulary>(std::move(v));
}

void TokenVocabulary::BuildStringTable(uint8_t state, StringTokenTable* table) const {
  const int32_t n = size();
  table->inside.assign((n + 63) / 64, 0);
  for (int32_t id = 0; id < n; ++id) {
    if (is_excluded(id)) continue;
    const std::string_view s = bytes(id);
    uint8_t q = state;
    uint32_t chars = 0;
    uint32_t entry = StringTokenTable::kInside;
    for (size_t i = 0; i < s.size(); ++i) {
      const uint8_t next = json_string::Next(q, static_cast<uint8_t>(s[i]));
      if (next == json_string::kInvalid) {
        entry = StringTokenTable::kInvalid;
        break;
      }
      if (next == json_string::kClosed) {
        entry = StringTokenTable::kCloses | (static_cast<uint32_t>(i + 1) << 16);
        break;
      }
      if (q == json_string::kNormal) chars = std::min<uint32_t>(chars + 1, 1023);
      q = next;
    }
    if (entry == StringTokenTable::kInvalid) continue;
    entry |= chars << 6;
    if (StringTokenTable::ClassOf(entry) == StringTokenTable::kInside) {
      entry |= static_cast<uint32_t>(q) << 2;
      table->inside[id >> 6] |= uint64_t{1} << (id & 63);
      table->inside_ids.push_back(id);
      table->inside_entries.push_back(entry);
      table->max_inside_chars = std::max(table->max_inside_chars, chars);
    } else {
      table->closing.push_back({id, entry});
    }
  }
  // Fewest characters first, so that a string near its maxLength scans only a prefix.
  std::vector<size_t> order(table->inside_ids.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return StringTokenTable::Chars(table->inside_entries[a]) < StringTokenTable::Chars(table->inside_entries[b]);
  });
  std::vector<int32_t> ids(order.size());
  std::vector<uint32_t> entries(order.size());
  for (size_t i = 0; i < order.size(); ++i) {
    ids[i] = table->inside_ids[order[i]];
    entries[i] = table->inside_entries[order[i]];
  }
  table->inside_ids = std::move(ids);
  table->inside_entries = std::move(entries);
  table->closing.shrink_to_fit();
}

const StringTokenTable& TokenVocabulary::string_table(uint8_t state) const {
  std::call_once(string_once_[state], [&] {
    auto table = std::make_unique<StringTokenTable>();
    BuildStringTable(state, table.get());
    string_tables_[state] = std::move(table);
    string_built_[state].store(true, std::memory_order_release);
  });
  return *string_tables_[state];
}

size_t TokenVocabulary::Bytes() const {
  size_t b = arena_.capacity() + offsets_.capacity() * 4 + flags_.capacity() + end_tokens_.capacity() * 4;
  b += trie_.byte.capacity() + trie_.depth.capacity() * 2 + trie_.skip.capacity() * 4 +
       trie_.token_begin.capacity() * 4 + trie_.tokens.capacity() * 4;
  for (uint8_t q = 0; q < json_string::kNumStates; ++q) {
    // Only tables call_once has published: reading one another thread is building would race.
    if (!string_built_[q].load(std::memory_order_acquire)) continue;
    const StringTokenTable& t = *string_tables_[q];
    b += t.inside.capacity() * 8 + t.inside_ids.capacity() * 4 + t.inside_entries.capacity() * 4 +
         t.closing.capacity() * 8;
  }
  return b;
}

}  // namespace gemlet
