// WAV (RIFF/WAVE) read here, every offset checked against the buffer: integer PCM of 8/16/24/32 bits,
// 32/64-bit float, plain or WAVE_FORMAT_EXTENSIBLE, averaged to mono.
#include <cstdio>
#include <cstring>
#include <string>
#include <string_view>

#include "media/audio_codecs.h"

namespace gemlet::media::internal {
namespace {

constexpr int kTagPcm = 0x0001;
constexpr int kTagFloat = 0x0003;
constexpr int kTagExtensible = 0xfffe;

uint16_t Le16(const uint8_t* p) { return static_cast<uint16_t>(p[0] | p[1] << 8); }
uint32_t Le32(const uint8_t* p) {
  return uint32_t{p[0]} | uint32_t{p[1]} << 8 | uint32_t{p[2]} << 16 | uint32_t{p[3]} << 24;
}

struct WavFormat {
  int tag = 0;  // after WAVE_FORMAT_EXTENSIBLE is resolved to its sub-format
  int channels = 0;
  uint32_t sample_rate = 0;
  int block_align = 0;
  int bits = 0;  // the container's bits per sample
};

struct WavChunks {
  bool has_format = false;
  WavFormat format;
  bool has_data = false;
  std::span<const uint8_t> data;
};

// The codecs a WAV can hold that are not read here, for the message.
std::string TagName(int tag) {
  switch (tag) {
    case 0x0002: return "Microsoft ADPCM";
    case 0x0006: return "A-law";
    case 0x0007: return "mu-law";
    case 0x0011: return "IMA ADPCM";
    case 0x0031: return "GSM 6.10";
    case 0x0050: return "MPEG audio";
    case 0x0055: return "MP3";
    case 0x00ff:
    case 0x1610: return "AAC";
  }
  char hex[32];
  std::snprintf(hex, sizeof(hex), "format tag 0x%04x", tag);
  return hex;
}

// The "fmt " chunk. WAVE_FORMAT_EXTENSIBLE names its codec by a GUID whose first two bytes are the
// plain format tag and whose other 14 are the fixed KSDATAFORMAT suffix.
Result<WavFormat> ParseFormat(std::span<const uint8_t> chunk) {
  if (chunk.size() < 16) {
    return Status::Error("corrupt WAV: the fmt chunk has " + std::to_string(chunk.size()) + " bytes, fewer than 16");
  }
  const uint8_t* p = chunk.data();
  WavFormat f;
  f.tag = Le16(p);
  f.channels = Le16(p + 2);
  f.sample_rate = Le32(p + 4);
  f.block_align = Le16(p + 12);
  f.bits = Le16(p + 14);
  if (f.tag == kTagExtensible) {
    static constexpr uint8_t kGuidSuffix[14] = {0x00, 0x00, 0x00, 0x00, 0x10, 0x00, 0x80,
                                                0x00, 0x00, 0xaa, 0x00, 0x38, 0x9b, 0x71};
    if (chunk.size() < 40 || Le16(p + 16) < 22) {
      return Status::Error("corrupt WAV: WAVE_FORMAT_EXTENSIBLE without its 22-byte extension");
    }
    if (std::memcmp(p + 26, kGuidSuffix, sizeof(kGuidSuffix)) != 0) {
      return Status::Error("WAV holds a codec named by a non-standard GUID; gemlet reads PCM and float WAV");
    }
    f.tag = Le16(p + 24);
  }
  return f;
}

Result<WavChunks> WalkChunks(std::span<const uint8_t> bytes) {
  WavChunks chunks;
  size_t offset = 12;
  while (!(chunks.has_format && chunks.has_data)) {
    if (bytes.size() - offset < 8) {
      if (!chunks.has_format) return Status::Error("corrupt WAV: no fmt chunk (the file is truncated or not a WAV)");
      return Status::Error("corrupt WAV: no data chunk (the file is truncated)");
    }
    const std::string_view id(reinterpret_cast<const char*>(bytes.data() + offset), 4);
    const uint32_t size = Le32(bytes.data() + offset + 4);
    const size_t body = offset + 8;
    const size_t left = bytes.size() - body;
    if (id == "data") {
      // A writer that cannot seek back (a pipe) leaves the size at 0xffffffff: the data runs to the end.
      if (size > left && size != 0xffffffffu) {
        return Status::Error("WAV is truncated: its data chunk claims " + std::to_string(size) + " bytes, " +
                             std::to_string(left) + " are there");
      }
      chunks.has_data = true;
      chunks.data = bytes.subspan(body, size == 0xffffffffu ? left : size);
    } else if (size > left) {
      return Status::Error("corrupt WAV: the '" + std::string(id) + "' chunk claims " + std::to_string(size) +
                           " bytes, " + std::to_string(left) + " are left (the file is truncated)");
    } else if (id == "fmt " && !chunks.has_format) {
      ASSIGN_OR_RETURN(chunks.format, ParseFormat(bytes.subspan(body, size)));
      chunks.has_format = true;
    }
    if (chunks.has_format && chunks.has_data) break;
    // Chunks are padded to an even size.
    const size_t next = size_t{size} + (size & 1);
    if (next >= left) {
      return Status::Error(chunks.has_format ? "corrupt WAV: no data chunk"
                                             : "corrupt WAV: no fmt chunk before the end");
    }
    offset = body + next;
  }
  return chunks;
}

float ReadU8(const uint8_t* p) { return static_cast<float>(int{p[0]} - 128) / 128.0f; }
float ReadS16(const uint8_t* p) { return static_cast<float>(static_cast<int16_t>(Le16(p))) / 32768.0f; }
float ReadS24(const uint8_t* p) {
  const int32_t v = static_cast<int32_t>(uint32_t{p[0]} << 8 | uint32_t{p[1]} << 16 | uint32_t{p[2]} << 24) >> 8;
  return static_cast<float>(v) / 8388608.0f;
}
float ReadS32(const uint8_t* p) { return static_cast<float>(static_cast<int32_t>(Le32(p))) / 2147483648.0f; }
float ReadF32(const uint8_t* p) {
  float v;
  const uint32_t bits = Le32(p);
  std::memcpy(&v, &bits, 4);
  return v;
}
float ReadF64(const uint8_t* p) {
  const uint64_t bits = uint64_t{Le32(p)} | uint64_t{Le32(p + 4)} << 32;
  double v;
  std::memcpy(&v, &bits, 8);
  return static_cast<float>(v);
}

using SampleReader = float (*)(const uint8_t*);

Result<SampleReader> ReaderFor(const WavFormat& f) {
  if (f.tag == kTagPcm) {
    switch (f.bits) {
      case 8: return &ReadU8;
      case 16: return &ReadS16;
      case 24: return &ReadS24;
      case 32: return &ReadS32;
    }
    return Status::Error("WAV holds " + std::to_string(f.bits) + "-bit PCM; gemlet reads 8, 16, 24 and 32-bit PCM");
  }
  if (f.tag == kTagFloat) {
    if (f.bits == 32) return &ReadF32;
    if (f.bits == 64) return &ReadF64;
    return Status::Error("WAV holds " + std::to_string(f.bits) + "-bit float; gemlet reads 32 and 64-bit float");
  }
  return Status::Error("WAV holds " + TagName(f.tag) + " audio; gemlet reads PCM and float WAV (convert it first)");
}

}  // namespace

Result<Audio> DecodeWav(std::span<const uint8_t> bytes, const AudioLimits& limits) {
  ASSIGN_OR_RETURN(const WavChunks chunks, WalkChunks(bytes));
  const WavFormat& f = chunks.format;
  ASSIGN_OR_RETURN(const SampleReader read, ReaderFor(f));
  if (f.channels == 0 || f.block_align != f.channels * (f.bits / 8)) {
    return Status::Error("corrupt WAV: block align " + std::to_string(f.block_align) + " for " +
                         std::to_string(f.channels) + " channels of " + std::to_string(f.bits) + " bits");
  }
  // A partial frame at the end (a writer stopped mid-frame) is dropped, as libsndfile and Python's
  // wave module do.
  const uint64_t frames = chunks.data.size() / static_cast<size_t>(f.block_align);
  RETURN_IF_ERROR(CheckStream(frames, f.sample_rate, f.channels, limits, "WAV"));
  if (frames == 0) return Status::Error("WAV holds no samples");
  Audio audio;
  audio.sample_rate = static_cast<int>(f.sample_rate);
  audio.samples.resize(frames);
  const size_t width = static_cast<size_t>(f.bits / 8);
  const uint8_t* p = chunks.data.data();
  if (f.channels == 1) {
    for (uint64_t i = 0; i < frames; ++i, p += width) audio.samples[i] = read(p);
    return audio;
  }
  for (uint64_t i = 0; i < frames; ++i) {
    double sum = 0.0;
    for (int c = 0; c < f.channels; ++c, p += width) sum += read(p);
    audio.samples[i] = static_cast<float>(sum / f.channels);
  }
  return audio;
}

}  // namespace gemlet::media::internal
