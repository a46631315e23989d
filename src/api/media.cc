// Images and audio through the public API: the engine's towers (EngineOptions::mmproj_path), an
// image's bytes or pixels and a clip's bytes, samples or features into soft tokens (EncodedMedia),
// and prompts that hold them. Decoding needs src/media (Debian's image and audio libraries); a
// build without it (the arm64 cross build) still encodes pixels and features given preprocessed.
#include <cinttypes>
#include <cstdio>

#include "api/api_internal.h"
#include "encoders/audio_encoder.h"
#include "encoders/vision_encoder.h"
#include "kernels/packed_cache.h"
#include "runtime/media_prompt.h"
#if defined(GEMLET_HAVE_MEDIA)
#include "media/audio.h"
#include "media/audio_features.h"
#include "media/image.h"
#include "media/image_preprocess.h"
#endif

namespace gemlet {

namespace api {

namespace {

// A tower fits the model: its family's text model, of the width it projects to.
Status CheckTowerFits(const Engine::Impl& impl, const std::string& what, const std::string& projector,
                      const char* family, int projection_dim) {
  const std::string& path = impl.options.mmproj_path;
  const ModelConfig& m = impl.runtime->config();
  if (m.arch != family || !impl.runtime->model().TakesEmbeddings()) {
    return Status::Error(StatusCode::kInvalidArgument, "mmproj '" + path + "': its " + what + " tower (" + projector +
                                                           ") is for a " + family + " model, and this model is " + m.arch);
  }
  if (projection_dim != m.d_model) {
    return Status::Error(StatusCode::kInvalidArgument, "mmproj '" + path + "': its " + what + " tower projects to width " +
                                                           std::to_string(projection_dim) + ", and this model's width is " +
                                                           std::to_string(m.d_model) + ": it belongs to another model");
  }
  return Status::Ok();
}

}  // namespace

Status LoadTowers(Engine::Impl& impl) {
  const std::string& path = impl.options.mmproj_path;
  if (path.empty()) return Status::Ok();
  const auto refused = [&](const std::string& message) {
    return Status::Error(StatusCode::kInvalidArgument, "mmproj '" + path + "': " + message);
  };
  auto towers = ReadMmprojTowers(path);
  if (!towers.ok()) return refused(towers.message());
  if (!towers.value().vision && !towers.value().audio) return refused("it holds neither a vision nor an audio tower");
  std::string projectors;
  if (towers.value().vision) {
    auto vision = VisionEncoder::Open(path);
    if (!vision.ok()) return refused(vision.message());
    const VisionTowerConfig& c = vision.value()->config();
    RETURN_IF_ERROR(CheckTowerFits(impl, "vision", c.projector_name,
                                   c.projector == VisionProjector::kGemma4    ? "gemma4"
                                   : c.projector == VisionProjector::kGemma3n ? "gemma3n"
                                                                              : "gemma3",
                                   c.projection_dim));
    impl.vision = std::move(vision).value();
    impl.info.takes_images = true;
    projectors = c.projector_name;
  }
  if (towers.value().audio) {
    AudioEncoderOptions o;
    o.attention_mask = impl.options.audio_hf_eager_mask ? AudioAttentionMask::kHfEager : AudioAttentionMask::kLocalWindow;
    auto audio = AudioEncoder::Open(path, o);
    if (!audio.ok()) return refused(audio.message());
    const AudioTowerConfig& c = audio.value()->config();
    RETURN_IF_ERROR(CheckTowerFits(impl, "audio", c.projector_name,
                                   c.projector == AudioProjector::kGemma4 ? "gemma4" : "gemma3n", c.projection_dim));
    impl.audio = std::move(audio).value();
    impl.info.takes_audio = true;
    projectors += (projectors.empty() ? "" : ",") + c.projector_name;
  }
  impl.info.mmproj_projector = projectors;
  return Status::Ok();
}

}  // namespace api

namespace {

// 32 hex digits over what was encoded: two FNV-1a passes with different seeds.
std::string ContentHash(std::span<const float> values, std::span<const int32_t> positions) {
  uint64_t h[2] = {0xcbf29ce484222325ull, 0x84222325cbf29ce4ull};
  for (uint64_t& x : h) {
    x = Fnv1a64(values.data(), values.size_bytes(), x);
    x = Fnv1a64(positions.data(), positions.size_bytes(), x);
  }
  char out[33];
  std::snprintf(out, sizeof out, "%016" PRIx64 "%016" PRIx64, h[0], h[1]);
  return out;
}

Result<const VisionEncoder*> Vision(const Engine::Impl& impl) {
  if (!impl.vision) {
    return Status::Error(StatusCode::kInvalidArgument,
                         impl.runtime->model().TakesEmbeddings()
                             ? "this engine has no vision tower: load it with its mmproj file (--mmproj)"
                             : "this model (" + impl.runtime->config().arch + ") takes text only, no images");
  }
  return impl.vision.get();
}

// The tower on the engine's current kernels and threads (its thread limit included).
Result<std::shared_ptr<const EncodedMedia>> EncodePixels(const Engine::Impl& impl, std::span<const float> values,
                                                         std::span<const int32_t> positions) {
  ASSIGN_OR_RETURN(const VisionEncoder* vision, Vision(impl));
  const VisionTowerConfig& c = vision->config();
  const Engine::Impl::Kernels k = impl.CurrentKernels();
  int threads = runtime::ResolveThreads(impl.options.n_threads);
  if (const int limit = impl.thread_limit.load(); limit > 0) threads = std::min(threads, limit);
  KernelContext ctx(threads, k.table, k.options);
  auto media = std::make_shared<EncodedMedia>();
  media->kind = MediaKind::kImage;
  media->n_embd = c.projection_dim;
  media->two_way = TextBidirectional(c, impl.runtime->config().d_model);
  if (c.projector != VisionProjector::kGemma4) {
    const bool gemma3n = c.projector == VisionProjector::kGemma3n;
    const size_t want = 3 * static_cast<size_t>(c.image_size) * static_cast<size_t>(c.image_size);
    if (values.size() != want || !positions.empty()) {
      return Status::Error(StatusCode::kInvalidArgument,
                           std::string(gemma3n ? "Gemma 3n" : "Gemma 3") + " pixels are [3, " + std::to_string(c.image_size) +
                               ", " + std::to_string(c.image_size) + "] floats (" + std::to_string(want) +
                               "), without positions; got " + std::to_string(values.size()));
    }
    media->n_tokens = gemma3n ? c.soft_tokens : c.n_tokens();
    // Gemma 3n's end-of-image token is the first vision hard token, embedded by the tower's embedder
    // (HF: ids from vision vocab_offset on go through embed_vision): it travels with the image as its
    // last row, as Gemma 3n's end-of-audio does with a clip.
    int32_t end = -1;
    if (gemma3n) {
      end = impl.runtime->tokenizer().vocab().Find("<end_of_image>");
      if (end < 0) return Status::Error("the vocabulary has no '<end_of_image>' (Gemma 3n's image markup)");
    }
    media->embeddings.resize(static_cast<size_t>(media->n_tokens + (gemma3n ? 1 : 0)) * static_cast<size_t>(media->n_embd));
    RETURN_IF_ERROR(vision->Encode(values.data(), media->embeddings.data(), ctx));
    if (gemma3n) {
      RETURN_IF_ERROR(vision->EmbedHardToken(
          end, media->embeddings.data() + static_cast<size_t>(media->n_tokens) * static_cast<size_t>(media->n_embd), ctx));
      media->n_tokens += 1;
      media->end_token = end;
    }
  } else {
    const size_t patch = 3 * static_cast<size_t>(c.patch_size) * static_cast<size_t>(c.patch_size);
    const size_t rows = positions.size() / 2;
    if (rows == 0 || positions.size() != 2 * rows || values.size() != rows * patch) {
      return Status::Error(StatusCode::kInvalidArgument,
                           "Gemma 4 pixels are patches [rows, " + std::to_string(patch) + "] with positions [rows, 2]; got " +
                               std::to_string(values.size()) + " values and " + std::to_string(positions.size()) +
                               " positions");
    }
    ASSIGN_OR_RETURN(media->n_tokens, vision->EncodePatches({values.data(), positions.data(), static_cast<int>(rows)},
                                                            &media->embeddings, ctx));
  }
  media->content_hash = ContentHash(values, positions);
  return std::shared_ptr<const EncodedMedia>(std::move(media));
}

#if defined(GEMLET_HAVE_MEDIA)
Result<std::shared_ptr<const EncodedMedia>> EncodeDecoded(const Engine::Impl& impl, const media::Image& image,
                                                          const ImageOptions& options) {
  ASSIGN_OR_RETURN(const VisionEncoder* vision, Vision(impl));
  const VisionTowerConfig& c = vision->config();
  const ImageOptions::PanAndScan& pas = options.pan_and_scan;
  if (pas.enabled && c.projector != VisionProjector::kGemma3) {
    return Status::Error(StatusCode::kInvalidArgument, "pan-and-scan is Gemma 3's (its processor's do_pan_and_scan); this "
                                                       "model's images (" + c.projector_name + ") take none");
  }
  if (pas.enabled && (pas.min_crop_size <= 0 || pas.max_crops < 1 || !(pas.min_ratio > 0))) {
    return Status::Error(StatusCode::kInvalidArgument, "pan-and-scan needs min_crop_size > 0, max_crops >= 1 and "
                                                       "min_ratio > 0");
  }
  if (c.projector != VisionProjector::kGemma4) {
    // Gemma 3n's processor (SiglipImageProcessorFast) is Gemma 3's square bilinear resize with
    // rescaling only; its mmproj says mean 0, std 1.
    media::Gemma3ImageParams params;
    params.height = params.width = c.image_size;
    params.scaling.mean = c.mean;
    params.scaling.std = c.std;
    params.pan_and_scan = {pas.enabled, pas.min_crop_size, pas.max_crops, pas.min_ratio};
    ASSIGN_OR_RETURN(std::vector<media::Gemma3Pixels> pixels, media::PreprocessGemma3(image, params));
    ASSIGN_OR_RETURN(std::shared_ptr<const EncodedMedia> whole, EncodePixels(impl, pixels[0].values, {}));
    if (pixels.size() == 1) return whole;
    // The whole image first, then its crops (HF's order): each through the tower alone.
    auto with_crops = std::make_shared<EncodedMedia>(*whole);
    for (size_t i = 1; i < pixels.size(); ++i) {
      ASSIGN_OR_RETURN(std::shared_ptr<const EncodedMedia> crop, EncodePixels(impl, pixels[i].values, {}));
      with_crops->crops.push_back(std::move(crop));
    }
    return std::shared_ptr<const EncodedMedia>(std::move(with_crops));
  }
  if (options.max_soft_tokens < 0) {
    return Status::Error(StatusCode::kInvalidArgument, "max_soft_tokens must be >= 0 (0: the model's default)");
  }
  media::Gemma4ImageParams params;
  params.patch_size = c.patch_size;
  params.pooling_kernel_size = c.pool;
  params.max_soft_tokens = options.max_soft_tokens > 0 ? options.max_soft_tokens : c.max_soft_tokens;
  ASSIGN_OR_RETURN(media::Gemma4Pixels pixels, media::PreprocessGemma4(image, params));
  return EncodePixels(impl, pixels.pixel_values, pixels.position_ids);
}
#endif

Result<const AudioEncoder*> Audio(const Engine::Impl& impl) {
  if (!impl.audio) {
    return Status::Error(StatusCode::kInvalidArgument,
                         impl.info.takes_images ? "this model's mmproj has no audio tower: it takes images, not audio"
                         : impl.runtime->config().arch == "gemma4" || impl.runtime->config().arch == "gemma3n"
                             ? "this engine has no audio tower: load it with its mmproj file (--mmproj)"
                             : "this model (" + impl.runtime->config().arch + ") takes no audio");
  }
  return impl.audio.get();
}

// Features [frames, mels] with their valid-frame mask through the audio tower.
Result<std::shared_ptr<const EncodedMedia>> EncodeFeatures(const Engine::Impl& impl, std::span<const float> features,
                                                           std::span<const uint8_t> mask) {
  ASSIGN_OR_RETURN(const AudioEncoder* audio, Audio(impl));
  const AudioTowerConfig& c = audio->config();
  const size_t frames = features.size() / static_cast<size_t>(c.n_mels);
  if (frames == 0 || features.size() != frames * static_cast<size_t>(c.n_mels) || (!mask.empty() && mask.size() != frames)) {
    return Status::Error(StatusCode::kInvalidArgument,
                         "audio features are [frames, " + std::to_string(c.n_mels) + "] floats with a mask of one byte a "
                             "frame; got " + std::to_string(features.size()) + " floats and " + std::to_string(mask.size()) +
                             " mask bytes");
  }
  const Engine::Impl::Kernels k = impl.CurrentKernels();
  int threads = runtime::ResolveThreads(impl.options.n_threads);
  if (const int limit = impl.thread_limit.load(); limit > 0) threads = std::min(threads, limit);
  KernelContext ctx(threads, k.table, k.options);
  auto media = std::make_shared<EncodedMedia>();
  media->kind = MediaKind::kAudio;
  media->n_embd = c.projection_dim;
  ASSIGN_OR_RETURN(media->n_tokens, audio->Encode(features.data(), mask.empty() ? nullptr : mask.data(),
                                                  static_cast<int>(frames), &media->embeddings, ctx));
  if (media->n_tokens == 0) return Status::Error("the clip is too short: it gives the audio tower no frame");
  if (c.projector == AudioProjector::kGemma3n) {
    // Gemma 3n's end-of-audio token is embedded by the tower (a hard token of its vocabulary): it
    // travels with the clip as its last row.
    auto end = impl.runtime->tokenizer().vocab().Find("<end_of_audio>");
    if (end < 0) return Status::Error("the vocabulary has no '<end_of_audio>' (Gemma 3n's audio markup)");
    media->embeddings.resize(media->embeddings.size() + static_cast<size_t>(c.projection_dim));
    RETURN_IF_ERROR(audio->EmbedHardToken(end, media->embeddings.data() + static_cast<size_t>(media->n_tokens) * c.projection_dim,
                                          ctx));
    media->n_tokens += 1;
    media->end_token = end;
  }
  const std::vector<int32_t> mask_words(mask.begin(), mask.end());
  media->content_hash = ContentHash(features, mask_words);
  return std::shared_ptr<const EncodedMedia>(std::move(media));
}

#if defined(GEMLET_HAVE_MEDIA)
Result<std::shared_ptr<const EncodedMedia>> EncodeClip(const Engine::Impl& impl, const media::Audio& clip) {
  ASSIGN_OR_RETURN(const AudioEncoder* audio, Audio(impl));
  media::LogMelParams params = audio->config().projector == AudioProjector::kGemma3n ? media::Gemma3nLogMelParams()
                                                                                      : media::Gemma4LogMelParams();
  params.feature_size = audio->config().n_mels;
  if (clip.Seconds() > static_cast<double>(params.max_samples) / params.sampling_rate) {
    char text[96];
    std::snprintf(text, sizeof text, "the clip is %.1f s; the model hears at most %.0f s at a time", clip.Seconds(),
                  static_cast<double>(params.max_samples) / params.sampling_rate);
    return Status::Error(text);
  }
  ASSIGN_OR_RETURN(media::LogMelFeatures f, media::ComputeLogMel(clip, params));
  return EncodeFeatures(impl, f.values, f.mask);
}
#endif

#if !defined(GEMLET_HAVE_MEDIA)
Status NoMediaLibraries() {
  return Status::Error("this gemlet was built without image decoding (libpng, libjpeg, libwebp, libheif): pass "
                       "preprocessed pixels (EncodeImagePixels)");
}
#endif

}  // namespace

Result<std::shared_ptr<const EncodedMedia>> Engine::EncodeImage(std::span<const uint8_t> bytes,
                                                                 const ImageOptions& options) const {
  RETURN_IF_ERROR(Vision(*impl_).status());
#if defined(GEMLET_HAVE_MEDIA)
  auto image = media::DecodeImage(bytes);
  if (!image.ok()) return image.status();
  return EncodeDecoded(*impl_, image.value(), options);
#else
  (void)bytes;
  (void)options;
  return NoMediaLibraries();
#endif
}

Result<std::shared_ptr<const EncodedMedia>> Engine::EncodeImageFile(const std::string& path,
                                                                    const ImageOptions& options) const {
  RETURN_IF_ERROR(Vision(*impl_).status());
#if defined(GEMLET_HAVE_MEDIA)
  auto image = media::LoadImageFile(path);
  if (!image.ok()) return image.status();
  return EncodeDecoded(*impl_, image.value(), options);
#else
  (void)path;
  (void)options;
  return NoMediaLibraries();
#endif
}

Result<std::shared_ptr<const EncodedMedia>> Engine::EncodeImagePixels(std::span<const float> values,
                                                                      std::span<const int32_t> positions) const {
  return EncodePixels(*impl_, values, positions);
}

Result<std::shared_ptr<const EncodedMedia>> Engine::EncodeAudio(std::span<const uint8_t> bytes) const {
  RETURN_IF_ERROR(Audio(*impl_).status());
#if defined(GEMLET_HAVE_MEDIA)
  ASSIGN_OR_RETURN(media::Audio clip, media::DecodeAudio(bytes));
  return EncodeClip(*impl_, clip);
#else
  (void)bytes;
  return NoMediaLibraries();
#endif
}

Result<std::shared_ptr<const EncodedMedia>> Engine::EncodeAudioFile(const std::string& path) const {
  RETURN_IF_ERROR(Audio(*impl_).status());
#if defined(GEMLET_HAVE_MEDIA)
  ASSIGN_OR_RETURN(media::Audio clip, media::LoadAudioFile(path));
  return EncodeClip(*impl_, clip);
#else
  (void)path;
  return NoMediaLibraries();
#endif
}

Result<std::shared_ptr<const EncodedMedia>> Engine::EncodeAudioPcm(std::span<const float> samples, int sample_rate,
                                                                   int channels) const {
  RETURN_IF_ERROR(Audio(*impl_).status());
  if (sample_rate < 1000 || sample_rate > 384000 || channels < 1 || channels > 64 ||
      samples.size() % static_cast<size_t>(channels) != 0) {
    return Status::Error(StatusCode::kInvalidArgument,
                         "PCM needs a rate in [1000, 384000] Hz, 1 to 64 channels and whole frames; got " +
                             std::to_string(samples.size()) + " samples, " + std::to_string(channels) + " channels at " +
                             std::to_string(sample_rate) + " Hz");
  }
#if defined(GEMLET_HAVE_MEDIA)
  media::Audio clip;
  clip.sample_rate = sample_rate;
  const size_t frames = samples.size() / static_cast<size_t>(channels);
  clip.samples.resize(frames);
  for (size_t i = 0; i < frames; ++i) {
    float sum = 0;
    for (int ch = 0; ch < channels; ++ch) sum += samples[i * static_cast<size_t>(channels) + static_cast<size_t>(ch)];
    clip.samples[i] = sum / static_cast<float>(channels);
  }
  return EncodeClip(*impl_, clip);
#else
  return NoMediaLibraries();
#endif
}

Result<std::shared_ptr<const EncodedMedia>> Engine::EncodeAudioFeatures(std::span<const float> features,
                                                                        std::span<const uint8_t> mask) const {
  return EncodeFeatures(*impl_, features, mask);
}

Result<Prompt> Engine::TokenizePrompt(std::span<const ContentPart> parts, const TokenizeOptions& options) const {
  const runtime::Engine& rt = *impl_->runtime;
  Prompt prompt;
  if (options.add_special && rt.tokenizer().vocab().add_bos() && rt.tokenizer().bos_id() >= 0) {
    prompt.tokens.push_back(rt.tokenizer().bos_id());
  }
  runtime::MediaMarkup markup[2];
  for (const ContentPart& part : parts) {
    if (!part.media) {
      EncodeOptions e;
      e.parse_special = options.parse_special;
      rt.tokenizer().Encode(part.text, e, &prompt.tokens);
      continue;
    }
    runtime::MediaMarkup& m = markup[static_cast<int>(part.media->kind)];
    if (m.placeholder < 0) {
      auto found = runtime::FindMediaMarkup(rt, part.media->kind);
      if (!found.ok()) return Status::Error(StatusCode::kInvalidArgument, found.message());
      m = std::move(found).value();
    }
    runtime::AppendMedia(m, part.media, &prompt);
  }
  if (options.add_special && rt.tokenizer().vocab().add_eos() && rt.tokenizer().eos_id() >= 0) {
    prompt.tokens.push_back(rt.tokenizer().eos_id());
  }
  RETURN_IF_ERROR(runtime::CheckMediaSpans(rt, prompt.media, static_cast<int>(prompt.tokens.size())));
  return prompt;
}

Result<int32_t> Engine::MediaToken(MediaKind kind) const {
  auto markup = runtime::FindMediaMarkup(*impl_->runtime, kind);
  if (!markup.ok()) return Status::Error(StatusCode::kInvalidArgument, markup.message());
  return markup.value().placeholder;
}

Result<Prompt> Engine::ChatPrompt(std::span<const Message> messages, const ChatOptions& options) const {
  if (messages.empty()) return Status::Error(StatusCode::kInvalidArgument, "the conversation is empty");
  const std::vector<Message> chat(messages.begin(), messages.end());
  runtime::ChatRenderOptions o;
  static_cast<ChatOptions&>(o) = options;
  ASSIGN_OR_RETURN(Prompt prompt, runtime::EncodeChatPrompt(*impl_->runtime, chat, o));
  RETURN_IF_ERROR(runtime::CheckMediaSpans(*impl_->runtime, prompt.media, static_cast<int>(prompt.tokens.size())));
  return prompt;
}

}  // namespace gemlet
