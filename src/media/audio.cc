// DecodeAudio and LoadAudioFile: the format sniffed from the first bytes, the limits, the dispatch to
// one decoder per format.
#include "media/audio.h"

#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string_view>

#include "media/audio_codecs.h"

namespace gemlet::media {
namespace {

bool StartsWith(std::span<const uint8_t> bytes, size_t offset, std::string_view magic) {
  return bytes.size() >= offset + magic.size() && std::memcmp(bytes.data() + offset, magic.data(), magic.size()) == 0;
}

// An MPEG-1/2/2.5 audio frame header (layer I, II or III): the 11-bit sync, then no reserved version,
// layer, bitrate or sample-rate code. ADTS (AAC) shares the sync but has layer 0.
bool IsMpegAudioFrame(std::span<const uint8_t> bytes, size_t offset) {
  if (bytes.size() < offset + 4) return false;
  const uint8_t* p = bytes.data() + offset;
  if (p[0] != 0xff || (p[1] & 0xe0) != 0xe0) return false;
  const int version = (p[1] >> 3) & 3, layer = (p[1] >> 1) & 3;
  const int bitrate = p[2] >> 4, rate = (p[2] >> 2) & 3;
  return version != 1 && layer != 0 && bitrate != 15 && rate != 3;
}

bool IsAdtsFrame(std::span<const uint8_t> bytes) {
  return bytes.size() >= 7 && bytes[0] == 0xff && (bytes[1] & 0xf6) == 0xf0;
}

// What an unreadable file seems to be, for the message ("" when nothing is recognised).
const char* Resemblance(std::span<const uint8_t> bytes) {
  if (IsAdtsFrame(bytes)) return "AAC (ADTS)";
  if (StartsWith(bytes, 4, "ftypM4A") || StartsWith(bytes, 4, "ftypM4B") || StartsWith(bytes, 4, "ftyp3gp")) {
    return "AAC in MP4/M4A (a phone's voice memo)";
  }
  if (StartsWith(bytes, 4, "ftyp")) return "an ISO media file (MP4, M4A, MOV, ...)";
  if (StartsWith(bytes, 0, "RIFX")) return "a big-endian WAV (RIFX)";
  if (StartsWith(bytes, 0, "RF64") || StartsWith(bytes, 0, "BW64")) return "a 64-bit WAV (RF64/BW64)";
  if (StartsWith(bytes, 0, "RIFF")) return "a RIFF file that is not WAVE (AVI, WebP, ...)";
  if (StartsWith(bytes, 0, "FORM") && (StartsWith(bytes, 8, "AIFF") || StartsWith(bytes, 8, "AIFC"))) return "AIFF";
  if (StartsWith(bytes, 0, "caff")) return "Core Audio (CAF)";
  if (StartsWith(bytes, 0, "\x1a\x45\xdf\xa3")) return "WebM/Matroska";
  if (StartsWith(bytes, 0, "#!AMR")) return "AMR";
  if (StartsWith(bytes, 0, "\x30\x26\xb2\x75\x8e\x66\xcf\x11")) return "WMA/ASF";
  if (StartsWith(bytes, 0, "wvpk")) return "WavPack";
  if (StartsWith(bytes, 0, ".snd")) return "Sun/NeXT audio (AU)";
  if (StartsWith(bytes, 0, "MThd")) return "MIDI";
  return "";
}

Status UnknownFormat(std::span<const uint8_t> bytes) {
  std::string message = "not audio gemlet can read: WAV, FLAC, Ogg (Opus, Vorbis) or MP3";
  if (const char* like = Resemblance(bytes); *like != '\0') {
    message += std::string(" (this looks like ") + like + "; convert it first, e.g. ffmpeg -i IN -ar 16000 OUT.wav)";
  }
  return Status::Error(message);
}

Result<Audio> DecodeSniffed(std::span<const uint8_t> bytes, AudioFormat format, const AudioLimits& limits) {
  switch (format) {
    case AudioFormat::kWav: return internal::DecodeWav(bytes, limits);
    case AudioFormat::kFlac: return internal::DecodeWithSndfile(bytes, format, limits);
    case AudioFormat::kOgg: return internal::DecodeOgg(bytes, limits);
    case AudioFormat::kMp3: return internal::DecodeMp3(bytes, limits);
    case AudioFormat::kUnknown: break;
  }
  return UnknownFormat(bytes);
}

}  // namespace

const char* AudioFormatName(AudioFormat format) {
  switch (format) {
    case AudioFormat::kWav: return "WAV";
    case AudioFormat::kFlac: return "FLAC";
    case AudioFormat::kOgg: return "Ogg";
    case AudioFormat::kMp3: return "MP3";
    case AudioFormat::kUnknown: break;
  }
  return "unknown";
}

AudioFormat SniffAudioFormat(std::span<const uint8_t> bytes) {
  if (StartsWith(bytes, 0, "RIFF") && StartsWith(bytes, 8, "WAVE")) return AudioFormat::kWav;
  if (StartsWith(bytes, 0, "fLaC")) return AudioFormat::kFlac;
  if (StartsWith(bytes, 0, "OggS")) return AudioFormat::kOgg;
  if (const size_t tag = internal::Id3v2TagSize(bytes); tag > 0) {
    // Some taggers put ID3v2 in front of FLAC too; otherwise the tag says MP3.
    return StartsWith(bytes, tag, "fLaC") ? AudioFormat::kFlac : AudioFormat::kMp3;
  }
  if (IsMpegAudioFrame(bytes, 0)) return AudioFormat::kMp3;
  return AudioFormat::kUnknown;
}

Result<Audio> DecodeAudio(std::span<const uint8_t> bytes, const AudioLimits& limits) {
  if (bytes.empty()) return Status::Error("the audio is empty (0 bytes)");
  if (bytes.size() > limits.max_bytes) {
    return Status::Error(StatusCode::kTooLarge, "the audio is " + std::to_string(bytes.size()) +
                                                    " bytes, over the limit of " + std::to_string(limits.max_bytes) + " bytes");
  }
  const AudioFormat format = SniffAudioFormat(bytes);
  Result<Audio> audio = DecodeSniffed(bytes, format, limits);
  if (!audio.ok()) return audio;
  // A float WAV can hold NaN or infinity, which would reach every feature a window touches.
  const auto bad = std::find_if(audio->samples.begin(), audio->samples.end(), [](float v) { return !std::isfinite(v); });
  if (bad != audio->samples.end()) {
    return Status::Error(std::string(AudioFormatName(format)) + " audio holds a sample that is not a finite number (" +
                         std::to_string(bad - audio->samples.begin()) + " samples in)");
  }
  return audio;
}

Result<Audio> LoadAudioFile(const std::string& path, const AudioLimits& limits) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return Status::Error("cannot open audio '" + path + "': " + std::strerror(errno));
  if (!S_ISREG(st.st_mode)) return Status::Error("audio '" + path + "' is not a regular file");
  if (static_cast<uint64_t>(st.st_size) > limits.max_bytes) {
    return Status::Error(StatusCode::kTooLarge, "audio '" + path + "' is " + std::to_string(st.st_size) +
                                                    " bytes, over the limit of " + std::to_string(limits.max_bytes) + " bytes");
  }
  std::unique_ptr<FILE, int (*)(FILE*)> file(std::fopen(path.c_str(), "rb"), &std::fclose);
  if (!file) return Status::Error("cannot open audio '" + path + "': " + std::strerror(errno));
  // One byte more than the limit allows shows a file that grew since stat.
  std::vector<uint8_t> bytes(static_cast<size_t>(st.st_size) + 1);
  const size_t got = std::fread(bytes.data(), 1, bytes.size(), file.get());
  if (std::ferror(file.get())) return Status::Error("cannot read audio '" + path + "'");
  bytes.resize(got);
  auto audio = DecodeAudio(bytes, limits);
  if (!audio.ok()) return audio.status().WithContext("audio '" + path + "'");
  return audio;
}

namespace internal {

Status CheckStream(uint64_t frames, int64_t sample_rate, int64_t channels, const AudioLimits& limits,
                   const char* format) {
  if (sample_rate <= 0 || sample_rate > kMaxSampleRate) {
    return Status::Error(std::string(format) + " audio has a sample rate of " + std::to_string(sample_rate) +
                         " Hz (gemlet reads 1 to " + std::to_string(kMaxSampleRate) + " Hz)");
  }
  if (channels <= 0 || channels > kMaxChannels) {
    return Status::Error(std::string(format) + " audio has " + std::to_string(channels) +
                         " channels (gemlet reads 1 to " + std::to_string(kMaxChannels) + ")");
  }
  const double seconds = static_cast<double>(frames) / static_cast<double>(sample_rate);
  if (frames > MaxFrames(static_cast<int>(sample_rate), limits)) {
    char text[64];
    std::snprintf(text, sizeof(text), "%.1f s", seconds);
    char limit[32];
    std::snprintf(limit, sizeof(limit), "%g s", limits.max_seconds);
    return Status::Error(StatusCode::kTooLarge, std::string(format) + " audio is " + text + " (" + std::to_string(frames) +
                                                    " frames at " + std::to_string(sample_rate) + " Hz), over the limit of " + limit);
  }
  return Status::Ok();
}

Status OverLimitWhileDecoding(const char* format, const AudioLimits& limits) {
  char limit[32];
  std::snprintf(limit, sizeof(limit), "%g s", limits.max_seconds);
  return Status::Error(StatusCode::kTooLarge, std::string(format) + " audio runs past the limit of " + limit + " as it decodes");
}

size_t Id3v2TagSize(std::span<const uint8_t> bytes) {
  if (!StartsWith(bytes, 0, "ID3") || bytes.size() < 10) return 0;
  const uint8_t* p = bytes.data();
  if ((p[6] | p[7] | p[8] | p[9]) & 0x80) return 0;  // not synchsafe: not a tag
  const size_t size = size_t{p[6]} << 21 | size_t{p[7]} << 14 | size_t{p[8]} << 7 | p[9];
  return 10 + size + ((p[5] & 0x10) != 0 ? 10 : 0);
}

uint64_t MaxFrames(int sample_rate, const AudioLimits& limits) {
  // Bounded well below 2^53 so that the product stays exact and a huge limit cannot overflow.
  const double seconds = limits.max_seconds >= 0.0 ? std::min(limits.max_seconds, 1e9) : 0.0;  // NaN: 0
  return static_cast<uint64_t>(std::floor(seconds * sample_rate));
}

}  // namespace internal
}  // namespace gemlet::media
