// Prefix reuse (prefix_reuse.h).
#include "runtime/prefix_reuse.h"

namespace gemlet::runtime {

Result<size_t> KeepCachedPrefix(Session& session, std::span<const int32_t> prompt, size_t* replayed) {
  const std::vector<int32_t>& held = session.history();
  size_t common = 0;
  while (common < held.size() && common < prompt.size() && held[common] == prompt[common]) ++common;
  if (common == prompt.size() && common > 0) --common;
  const int64_t before = session.tokens_evaluated();
  RETURN_IF_ERROR(session.Truncate(static_cast<int>(common)));
  if (replayed != nullptr) *replayed = static_cast<size_t>(session.tokens_evaluated() - before);
  return common;
}

}  // namespace gemlet::runtime
