// Lead-ins: the words a chat model puts before a task's result ("Sure! Here is the polished
// message:", "好的，以下是润色后的内容："), which a filter must not print.
#pragma once

#include <cstddef>
#include <string_view>

namespace gemlet::flows {

// Whether the answer opens like a lead-in ("Here is", "Sure", "Certainly", "以下是", "好的", ...) where
// the input does not open the same way (polishing "Sure, I'll come" keeps its "Sure").
bool OpensLikeLeadIn(std::string_view answer, std::string_view input);

// The bytes of the first lead-in at the start of the answer, with the whitespace after it: an
// interjection and its punctuation ("Sure! ...", "好的，..."); else the words up to a colon on the
// first line ("Here is the polished text: ..."); else a whole first line followed by more. 0 when it
// does not open like a lead-in or no cut is clear. Cut again for "Sure! Here it is: ...".
size_t LeadInLength(std::string_view answer, std::string_view input);

}  // namespace gemlet::flows
