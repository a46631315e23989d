// The per-format audio decoders behind DecodeAudio, and the checks they share (media-internal).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "base/status.h"
#include "media/audio.h"

namespace gemlet::media::internal {

// Each gets non-empty bytes of its own (sniffed) format and returns the clip averaged to mono.
Result<Audio> DecodeWav(std::span<const uint8_t> bytes, const AudioLimits& limits);
// Ogg: the page walk, then Vorbis (libvorbisfile) or Opus (DecodeWithSndfile).
Result<Audio> DecodeOgg(std::span<const uint8_t> bytes, const AudioLimits& limits);
// FLAC, and Ogg Opus once DecodeOgg has walked its pages, through libsndfile; `format` names which.
Result<Audio> DecodeWithSndfile(std::span<const uint8_t> bytes, AudioFormat format, const AudioLimits& limits);
// MP3 through libmpg123.
Result<Audio> DecodeMp3(std::span<const uint8_t> bytes, const AudioLimits& limits);

// The header's stream parameters against the limits, before any sample is allocated:
// "WAV audio is 36000.0 s (576000000 frames at 16000 Hz), over the limit of 600 s".
Status CheckStream(uint64_t frames, int64_t sample_rate, int64_t channels, const AudioLimits& limits,
                   const char* format);

// The most frames `limits` allows at `sample_rate` (checked by CheckStream first).
uint64_t MaxFrames(int sample_rate, const AudioLimits& limits);

// A stream that passes MaxFrames while it decodes (its header left the length out or understated it).
Status OverLimitWhileDecoding(const char* format, const AudioLimits& limits);

// The size of an ID3v2 tag at the start of `bytes` (header, synchsafe size, footer), 0 if none.
size_t Id3v2TagSize(std::span<const uint8_t> bytes);

// The sample rates and channel counts any decoder accepts: wider than any recording, narrow enough that
// a header's numbers cannot make the arithmetic overflow.
inline constexpr int64_t kMaxSampleRate = 768'000;
inline constexpr int64_t kMaxChannels = 64;

}  // namespace gemlet::media::internal
