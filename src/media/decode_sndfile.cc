// FLAC and Ogg Opus through libsndfile, which in Debian 12 (1.2.0) decodes them with the reference
// libraries (libFLAC, libopus), read from memory. Its Opus decoder runs at the rate the file was made
// at (16 kHz stays 16 kHz), where libopusfile would always give 48 kHz.
#include <sndfile.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "media/audio_codecs.h"

namespace gemlet::media::internal {
namespace {

// The bytes as a file for sf_open_virtual; reads past the end return short, seeks are clamped.
struct MemoryFile {
  std::span<const uint8_t> bytes;
  sf_count_t position = 0;

  static MemoryFile& Of(void* user) { return *static_cast<MemoryFile*>(user); }
  static sf_count_t Length(void* user) { return static_cast<sf_count_t>(Of(user).bytes.size()); }
  static sf_count_t Tell(void* user) { return Of(user).position; }
  static sf_count_t Seek(sf_count_t offset, int whence, void* user) {
    MemoryFile& f = Of(user);
    const sf_count_t size = static_cast<sf_count_t>(f.bytes.size());
    const sf_count_t base = whence == SEEK_CUR ? f.position : whence == SEEK_END ? size : 0;
    // Both terms are within +-2^62 for any offset libsndfile computes from a header, but an offset
    // read from a hostile file is clamped before the addition all the same.
    const sf_count_t step = std::clamp<sf_count_t>(offset, -size - 1, size + 1);
    f.position = std::clamp<sf_count_t>(base + step, 0, size);
    return f.position;
  }
  static sf_count_t Read(void* out, sf_count_t count, void* user) {
    MemoryFile& f = Of(user);
    const sf_count_t n = std::clamp<sf_count_t>(count, 0, static_cast<sf_count_t>(f.bytes.size()) - f.position);
    if (n > 0) std::memcpy(out, f.bytes.data() + f.position, static_cast<size_t>(n));
    f.position += n;
    return n;
  }
  static sf_count_t Write(const void*, sf_count_t, void*) { return 0; }
};

// libsndfile's words without its "Error : " prefix and final full stop.
std::string SndfileMessage(const char* text) {
  std::string_view m = text != nullptr ? text : "unknown error";
  if (m.starts_with("Error : ")) m.remove_prefix(8);
  if (m.ends_with('.')) m.remove_suffix(1);
  return std::string(m);
}

int ExpectedMajor(AudioFormat format) {
  switch (format) {
    case AudioFormat::kFlac: return SF_FORMAT_FLAC;
    case AudioFormat::kOgg: return SF_FORMAT_OGG;
    default: break;
  }
  return 0;
}

// Reads the whole stream in blocks, averaging each frame's channels, and refuses it as soon as it
// passes `max_frames` (a FLAC header may leave the length out). libsndfile clears a file's error at
// the start of every read, so a frame that fails (a FLAC CRC mismatch) is seen only right after the
// read that met it.
Result<std::vector<float>> ReadMono(SNDFILE* file, int channels, int rate, const AudioLimits& limits,
                                    const char* name) {
  const uint64_t max_frames = MaxFrames(rate, limits);
  constexpr sf_count_t kBlock = 4096;
  std::vector<float> block(static_cast<size_t>(kBlock) * channels);
  std::vector<float> mono;
  while (true) {
    const sf_count_t got = sf_readf_float(file, block.data(), kBlock);
    if (sf_error(file) != SF_ERR_NO_ERROR) {
      return Status::Error(std::string("corrupt ") + name + ": " + SndfileMessage(sf_strerror(file)));
    }
    if (got <= 0) break;
    if (mono.size() + static_cast<uint64_t>(got) > max_frames) return OverLimitWhileDecoding(name, limits);
    for (sf_count_t i = 0; i < got; ++i) {
      const float* frame = block.data() + i * channels;
      double sum = 0.0;
      for (int c = 0; c < channels; ++c) sum += frame[c];
      mono.push_back(channels == 1 ? frame[0] : static_cast<float>(sum / channels));
    }
  }
  return mono;
}

}  // namespace

Result<Audio> DecodeWithSndfile(std::span<const uint8_t> bytes, AudioFormat format, const AudioLimits& limits) {
  const char* name = format == AudioFormat::kOgg ? "Ogg Opus" : AudioFormatName(format);
  // A tagger's ID3v2 block in front of FLAC (not in the format, but met) is skipped.
  MemoryFile memory{format == AudioFormat::kFlac ? bytes.subspan(std::min(Id3v2TagSize(bytes), bytes.size())) : bytes};
  SF_VIRTUAL_IO io{&MemoryFile::Length, &MemoryFile::Seek, &MemoryFile::Read, &MemoryFile::Write, &MemoryFile::Tell};
  SF_INFO info{};
  SNDFILE* file = sf_open_virtual(&io, SFM_READ, &info, &memory);
  if (file == nullptr) {
    // sf_strerror(nullptr) reports the last failed open of the process: another thread's open can
    // overwrite it in between, so the message may be the wrong one, never a crash.
    return Status::Error(std::string("corrupt ") + name + ": libsndfile cannot open it (" +
                         SndfileMessage(sf_strerror(nullptr)) + ")");
  }
  const std::unique_ptr<SNDFILE, int (*)(SNDFILE*)> closer(file, &sf_close);
  if ((info.format & SF_FORMAT_TYPEMASK) != ExpectedMajor(format)) {
    char major[16];
    std::snprintf(major, sizeof(major), "0x%x", info.format & SF_FORMAT_TYPEMASK);
    return Status::Error(std::string("corrupt ") + name + ": libsndfile reads it as another format (" + major + ")");
  }
  // 0 or SF_COUNT_MAX: the header does not say (ReadMono then checks the limit as it goes).
  const uint64_t claimed = info.frames > 0 && info.frames != SF_COUNT_MAX ? static_cast<uint64_t>(info.frames) : 0;
  RETURN_IF_ERROR(CheckStream(claimed, info.samplerate, info.channels, limits, name));
  sf_command(file, SFC_SET_NORM_FLOAT, nullptr, SF_TRUE);  // integer codecs scaled by 1 / 2^(bits-1)
  ASSIGN_OR_RETURN(std::vector<float> mono, ReadMono(file, info.channels, info.samplerate, limits, name));
  if (mono.size() < claimed) {
    // libFLAC ends quietly at a cut between two frames; STREAMINFO still says how many there were.
    return Status::Error(std::string(name) + " is truncated: its header promises " + std::to_string(claimed) +
                         " samples, " + std::to_string(mono.size()) + " decode");
  }
  if (mono.empty()) return Status::Error(std::string(name) + " holds no samples");
  Audio audio;
  audio.sample_rate = info.samplerate;
  audio.samples = std::move(mono);
  return audio;
}

}  // namespace gemlet::media::internal
