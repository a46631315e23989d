// Decoded audio (mono float samples), the one entry that reads WAV, FLAC, Ogg (Opus, Vorbis) and MP3
// bytes into it, and resampling to a model's rate.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "base/status.h"

namespace gemlet::media {

// Mono samples in [-1, 1] (float formats may exceed it; nothing is clipped) at sample_rate.
struct Audio {
  int sample_rate = 0;
  std::vector<float> samples;

  double Seconds() const { return sample_rate > 0 ? static_cast<double>(samples.size()) / sample_rate : 0.0; }
};

// What a clip from outside may cost. The duration is checked against the header's frame count before
// anything is decoded, and again while decoding (an MP3's header only estimates its length), so a
// small file that claims hours of audio (FLAC of silence compresses a thousandfold) is refused without
// the allocation (StatusCode::kTooLarge, as for max_bytes). The models take 30 s a clip; longer
// recordings are cut by audio_split.h.
struct AudioLimits {
  double max_seconds = 600.0;
  size_t max_bytes = size_t{256} << 20;
};

enum class AudioFormat { kUnknown, kWav, kFlac, kOgg, kMp3 };
const char* AudioFormatName(AudioFormat format);

// The format from the first bytes (never from a file name). Ogg covers Opus and Vorbis (and whatever
// else Ogg holds, refused by name); an MP3 is recognised by an ID3v2 tag or an MPEG audio frame header.
AudioFormat SniffAudioFormat(std::span<const uint8_t> bytes);

// Decodes a whole clip and averages its channels to mono. WAV: 8/16/24/32-bit integer PCM (int16 as
// v / 32768, what the HF goldens feed the feature extractors) and 32/64-bit float, plain or
// WAVE_FORMAT_EXTENSIBLE, read here; FLAC and Ogg Opus through libsndfile; Ogg Vorbis through
// libvorbisfile; MP3 through libmpg123 (gapless). Truncated or corrupt data, unknown formats (AAC/M4A among them: no sane Debian
// decoder), and anything over `limits` are refused with a message. A bare MP3 frame stream cut
// exactly between frames cannot be told from a shorter one; one with a Xing/Info header can.
Result<Audio> DecodeAudio(std::span<const uint8_t> bytes, const AudioLimits& limits = {});

// Reads `path` (refused above limits.max_bytes before it is read) and decodes it as DecodeAudio does;
// messages name the path.
Result<Audio> LoadAudioFile(const std::string& path, const AudioLimits& limits = {});

// The clip at `target_rate` through libsoxr at its HQ setting (what transformers' own loading path
// resamples with, and librosa's default); a clip already at that rate comes back unchanged.
Result<Audio> ResampleAudio(const Audio& audio, int target_rate);

}  // namespace gemlet::media
