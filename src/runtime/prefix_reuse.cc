// Prefix reuse (prefix_reuse.h).
#include "runtime/prefix_reuse.h"

#include <utility>

#include "runtime/media_prompt.h"

namespace gemlet::runtime {

namespace {

// Media covering position p (an absolute position), if any.
const MediaSpan* SpanAt(std::span<const MediaSpan> media, size_t p) {
  for (const MediaSpan& s : media) {
    if (static_cast<size_t>(s.position) <= p && p < static_cast<size_t>(s.position + s.media->n_tokens)) return &s;
  }
  return nullptr;
}

}  // namespace

Result<size_t> KeepCachedPrefix(Session& session, std::span<const int32_t> prompt, size_t* replayed) {
  return KeepCachedPrefix(session, prompt, {}, replayed);
}

Result<size_t> KeepCachedPrefix(Session& session, std::span<const int32_t> prompt, std::span<const MediaSpan> media,
                                size_t* replayed) {
  const std::vector<int32_t>& held = session.history();
  size_t common = 0;
  while (common < held.size() && common < prompt.size() && held[common] == prompt[common]) ++common;
  // Media on either side must be the same media on the other, span for span; the first that is
  // not ends the prefix at its start.
  for (auto [a, b] : {std::pair(std::span<const MediaSpan>(session.media()), media),
                      std::pair(media, std::span<const MediaSpan>(session.media()))}) {
    for (const MediaSpan& s : a) {
      if (static_cast<size_t>(s.position) >= common) break;
      const MediaSpan* other = SpanAt(b, static_cast<size_t>(s.position));
      if (other == nullptr || other->position != s.position || !SameMedia(*other->media, *s.media)) {
        common = static_cast<size_t>(s.position);
        break;
      }
    }
  }
  if (common == prompt.size() && common > 0) --common;
  const int64_t before = session.tokens_evaluated();
  RETURN_IF_ERROR(session.Truncate(static_cast<int>(common)));
  if (replayed != nullptr) *replayed = static_cast<size_t>(session.tokens_evaluated() - before);
  return static_cast<size_t>(session.n_past());  // less than common where it fell inside media
}

}  // namespace gemlet::runtime
