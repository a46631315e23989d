// Prompts with images and audio: how each family's processor expands a media part into tokens (the
// markup around the soft tokens, and the placeholder they replace), chat messages with media parts
// as a Prompt, and the checks a prompt's media must pass before anything is evaluated.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "base/status.h"
#include "gemlet/types.hpp"
#include "runtime/chat_format.h"

namespace gemlet::runtime {

class Engine;  // runtime/session.h

// The tokens a model's processor puts around one image or clip, as HF's Gemma3Processor,
// Gemma3nProcessor and Gemma4Processor expand its placeholder:
//   Gemma 3 / 3n: "\n\n" <start_of_image> <image_soft_token> x N <end_of_image> "\n\n"
//                 (3n audio: <start_of_audio> ... <audio_soft_token> ... <end_of_audio>)
//   Gemma 4:      <|image> <|image|> x N <image|>   (audio: <|audio> <|audio|> x N <audio|>)
struct MediaMarkup {
  std::vector<int32_t> before;
  int32_t placeholder = -1;
  std::vector<int32_t> after;
  // Gemma 3's pan-and-scan (an image with crops), the tokens of PanAndScanText's pieces.
  std::vector<int32_t> original, crops_intro, between_crops, last;
};

// Gemma3Processor with do_pan_and_scan replaces an image with crops by
//   "Here is the original image " <image> " and here are some crops to help you see better "
//   <crop 1> " " <crop 2> ...
// and then each <image> by "\n\n" <start_of_image> <image_soft_token> x N <end_of_image> "\n\n". Its
// tokenizer splits the text at the special tokens, so the pieces between them are tokenized whole:
// these, each before a <start_of_image> (original, crops_intro, between_crops) or after the last
// <end_of_image> (last).
struct PanAndScanText {
  static constexpr const char* kOriginal = "Here is the original image \n\n";
  static constexpr const char* kCropsIntro = "\n\n and here are some crops to help you see better \n\n";
  static constexpr const char* kBetweenCrops = "\n\n \n\n";
  static constexpr const char* kLast = "\n\n";
};

// The markup from the model's vocabulary (found by the pieces' names, as in the released files);
// an error names the piece the vocabulary lacks.
Result<MediaMarkup> FindMediaMarkup(const Engine& engine, MediaKind kind);

// Appends `media` with its markup to `prompt`: the placeholders (and its own end token, Gemma 3n),
// and the span over them; an image with crops (Gemma 3's pan-and-scan) as the processor lays it
// out, a span for the image and one for each crop.
void AppendMedia(const MediaMarkup& markup, std::shared_ptr<const EncodedMedia> media, Prompt* prompt);

// The chat's prompt (EncodeChat) with the messages' media parts expanded, in order.
Result<Prompt> EncodeChatPrompt(const Engine& engine, const std::vector<Message>& messages,
                                const ChatRenderOptions& options);

// Whether `media` (positions relative to the first of n_tokens tokens) can be evaluated on this
// model: each span inside the tokens, in order, not overlapping, of the model's width, and the
// model one that takes embeddings. The error says what is wrong.
Status CheckMediaSpans(const Engine& engine, std::span<const MediaSpan> media, int n_tokens);

// Whether two media are the same input: the same object, or equal embeddings (bit for bit) and kind.
bool SameMedia(const EncodedMedia& a, const EncodedMedia& b);

}  // namespace gemlet::runtime
