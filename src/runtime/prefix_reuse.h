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
// Returns how many tokens were kept.
Result<size_t> KeepCachedPrefix(Session& session, std::span<const int32_t> prompt);

}  // namespace gemlet::runtime
