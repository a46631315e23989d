// Media in prompts (media_prompt.h).
#include "runtime/media_prompt.h"

#include <cstring>
#include <string>

#include "runtime/chat.h"
#include "runtime/session.h"

namespace gemlet::runtime {

namespace {

Result<int32_t> PieceId(const Engine& engine, const char* piece) {
  const int32_t id = engine.tokenizer().vocab().Find(piece);
  if (id < 0) return Status::Error(std::string("the vocabulary has no '") + piece + "' (the model's media markup)");
  return id;
}

// "\n\n" as one token, as the processors write it (id 108 in the Gemma 3 vocabularies).
Result<int32_t> DoubleNewline(const Engine& engine) {
  if (const int32_t id = engine.tokenizer().vocab().Find("\n\n"); id >= 0) return id;
  EncodeOptions e;
  std::vector<int32_t> ids;
  engine.tokenizer().Encode("\n\n", e, &ids);
  if (ids.size() != 1) return Status::Error("the vocabulary has no single token for \"\\n\\n\" (the media markup)");
  return ids[0];
}

}  // namespace

Result<MediaMarkup> FindMediaMarkup(const Engine& engine, MediaKind kind) {
  MediaMarkup m;
  const bool audio = kind == MediaKind::kAudio;
  if (engine.chat_style() != ChatStyle::kGemma) {
    ASSIGN_OR_RETURN(const int32_t begin, PieceId(engine, audio ? "<|audio>" : "<|image>"));
    ASSIGN_OR_RETURN(m.placeholder, PieceId(engine, audio ? "<|audio|>" : "<|image|>"));
    ASSIGN_OR_RETURN(const int32_t end, PieceId(engine, audio ? "<audio|>" : "<image|>"));
    m.before = {begin};
    m.after = {end};
    return m;
  }
  ASSIGN_OR_RETURN(const int32_t newlines, DoubleNewline(engine));
  ASSIGN_OR_RETURN(const int32_t begin, PieceId(engine, audio ? "<start_of_audio>" : "<start_of_image>"));
  ASSIGN_OR_RETURN(m.placeholder, PieceId(engine, audio ? "<audio_soft_token>" : "<image_soft_token>"));
  ASSIGN_OR_RETURN(const int32_t end, PieceId(engine, audio ? "<end_of_audio>" : "<end_of_image>"));
  m.before = {newlines, begin};
  m.after = {end, newlines};
  if (!audio) {
    const auto tokens = [&](const char* text) {
      std::vector<int32_t> ids;
      engine.tokenizer().Encode(text, EncodeOptions{}, &ids);
      return ids;
    };
    m.original = tokens(PanAndScanText::kOriginal);
    m.crops_intro = tokens(PanAndScanText::kCropsIntro);
    m.between_crops = tokens(PanAndScanText::kBetweenCrops);
    m.last = tokens(PanAndScanText::kLast);
  }
  return m;
}

namespace {

// Gemma 3's image with its pan-and-scan crops (PanAndScanText): the image's markup is Gemma 3's
// (before = "\n\n" <start_of_image>, after = <end_of_image> "\n\n").
void AppendWithCrops(const MediaMarkup& markup, std::shared_ptr<const EncodedMedia> media, Prompt* prompt) {
  const int32_t begin = markup.before.back(), end = markup.after.front();
  const auto append = [&](const std::vector<int32_t>& text, std::shared_ptr<const EncodedMedia> image) {
    prompt->tokens.insert(prompt->tokens.end(), text.begin(), text.end());
    prompt->tokens.push_back(begin);
    prompt->media.push_back({static_cast<int>(prompt->tokens.size()), image});
    prompt->tokens.insert(prompt->tokens.end(), static_cast<size_t>(image->n_tokens), markup.placeholder);
    prompt->tokens.push_back(end);
  };
  const std::vector<std::shared_ptr<const EncodedMedia>> crops = media->crops;
  append(markup.original, std::move(media));
  for (size_t i = 0; i < crops.size(); ++i) append(i == 0 ? markup.crops_intro : markup.between_crops, crops[i]);
  prompt->tokens.insert(prompt->tokens.end(), markup.last.begin(), markup.last.end());
}

}  // namespace

void AppendMedia(const MediaMarkup& markup, std::shared_ptr<const EncodedMedia> media, Prompt* prompt) {
  if (!media->crops.empty() && !markup.original.empty() && markup.before.size() == 2 && markup.after.size() == 2) {
    AppendWithCrops(markup, std::move(media), prompt);
    return;
  }
  prompt->tokens.insert(prompt->tokens.end(), markup.before.begin(), markup.before.end());
  const int position = static_cast<int>(prompt->tokens.size());
  // Media that embeds its own end marker (Gemma 3n) covers that token too: the markup's copy goes.
  const bool own_end = media->end_token >= 0;
  prompt->tokens.insert(prompt->tokens.end(), static_cast<size_t>(media->n_tokens - (own_end ? 1 : 0)), markup.placeholder);
  if (own_end) prompt->tokens.push_back(media->end_token);
  auto after = markup.after.begin();
  if (own_end && after != markup.after.end() && *after == media->end_token) ++after;
  prompt->tokens.insert(prompt->tokens.end(), after, markup.after.end());
  prompt->media.push_back({position, std::move(media)});
}

Result<Prompt> EncodeChatPrompt(const Engine& engine, const std::vector<Message>& messages,
                                const ChatRenderOptions& options) {
  std::vector<std::shared_ptr<const EncodedMedia>> media;
  for (const Message& m : messages) {
    for (const ContentPart& part : m.parts) {
      if (part.media) media.push_back(part.media);
    }
  }
  Prompt prompt;
  if (media.empty()) {
    ASSIGN_OR_RETURN(prompt.tokens, EncodeChat(engine, messages, options));
    return prompt;
  }
  const Tokenizer& tok = engine.tokenizer();
  if (tok.bos_id() >= 0) prompt.tokens.push_back(tok.bos_id());
  ChatRenderOptions o = options;
  o.add_bos = false;
  ASSIGN_OR_RETURN(std::vector<ChatSegment> segments, RenderChatSegments(engine.chat_style(), messages, o));
  MediaMarkup markup[2];
  for (const ChatSegment& s : segments) {
    if (s.media < 0) {
      EncodeOptions e;
      e.parse_special = !s.is_content;
      tok.Encode(s.text, e, &prompt.tokens);
      continue;
    }
    std::shared_ptr<const EncodedMedia> item = media[static_cast<size_t>(s.media)];
    MediaMarkup& mk = markup[static_cast<int>(item->kind)];
    if (mk.placeholder < 0) {
      ASSIGN_OR_RETURN(mk, FindMediaMarkup(engine, item->kind));
    }
    AppendMedia(mk, std::move(item), &prompt);
  }
  return prompt;
}

Status CheckMediaSpans(const Engine& engine, std::span<const MediaSpan> media, int n_tokens) {
  if (media.empty()) return Status::Ok();
  if (!engine.model().TakesEmbeddings()) {
    return Status::Error(StatusCode::kInvalidArgument, "this model (" + engine.config().arch +
                                                           ") takes text only: no images or audio");
  }
  int64_t end = 0;
  for (size_t i = 0; i < media.size(); ++i) {
    const MediaSpan& s = media[i];
    const std::string which = "media " + std::to_string(i);
    if (!s.media || s.media->n_tokens <= 0) return Status::Error(StatusCode::kInvalidArgument, which + " is empty");
    const EncodedMedia& m = *s.media;
    if (m.n_embd != engine.config().d_model) {
      return Status::Error(StatusCode::kInvalidArgument,
                           which + " has rows of " + std::to_string(m.n_embd) + " floats, the model's width is " +
                               std::to_string(engine.config().d_model) + " (an mmproj of another model?)");
    }
    if (m.embeddings.size() != static_cast<size_t>(m.n_tokens) * static_cast<size_t>(m.n_embd)) {
      return Status::Error(StatusCode::kInvalidArgument, which + " holds " + std::to_string(m.embeddings.size()) +
                                                             " floats, not n_tokens x n_embd");
    }
    if (s.position < end || static_cast<int64_t>(s.position) + m.n_tokens > n_tokens) {
      return Status::Error(StatusCode::kInvalidArgument,
                           which + " at [" + std::to_string(s.position) + ", " + std::to_string(s.position + m.n_tokens) +
                               ") is out of order, overlaps another or lies outside the " + std::to_string(n_tokens) +
                               " tokens");
    }
    end = s.position + m.n_tokens;
  }
  return Status::Ok();
}

bool SameMedia(const EncodedMedia& a, const EncodedMedia& b) {
  if (&a == &b) return true;
  return a.kind == b.kind && a.n_tokens == b.n_tokens && a.n_embd == b.n_embd && a.two_way == b.two_way &&
         a.embeddings.size() == b.embeddings.size() &&
         std::memcmp(a.embeddings.data(), b.embeddings.data(), a.embeddings.size() * sizeof(float)) == 0;
}

}  // namespace gemlet::runtime
