// Prefix reuse across requests: a prompt that shares its beginning with what a session's cache holds
// (a system prompt, a document, the conversation so far) evaluates only the rest.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "base/status.h"
#include "runtime/session.h"

namespace gemlet::runtime {

// Keeps the longest prefix of `prompt` the cache holds, less the prompt's last token (its logits
// pick the first answer token, so it is always evaluated), and forgets the rest of the cache.
// Returns how many tokens were kept. Forgetting more than the rings' spare room refills the
// sliding-window rings by evaluating the kept tokens again (Session::Truncate): `replayed` (when
// given) gets how many were, so that a reply does not count them as reused from the cache.
// Media counts as held only where the cache holds the same media (SameMedia) at the same position:
// the kept prefix ends before the first image that differs, whatever its placeholder tokens say.
Result<size_t> KeepCachedPrefix(Session& session, std::span<const int32_t> prompt, size_t* replayed = nullptr);
Result<size_t> KeepCachedPrefix(Session& session, std::span<const int32_t> prompt, std::span<const MediaSpan> media,
                                size_t* replayed = nullptr);

}  // namespace gemlet::runtime
