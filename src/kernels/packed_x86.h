// The packing of the 16-row layouts that both x86 packed kernels read (packed-inl.h, AVX-512 VNNI,
// one 64-byte vector per 16 rows; packed_avx2-inl.h, AVX2, the same vector as two 32-byte halves
// of 8 rows): plain scalar code, so that one definition of each layout serves both targets and a
// change to it cannot reach one without the other. packed-inl.h's opening comment gives the layouts.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "tensor/quant_blocks.h"

namespace gemlet::packed_x86 {

constexpr int kRows = 16;

// Copies 4 bytes at src + src_stride * r to dst + 4 r for the 16 rows of a group: one vector.
inline void InterleaveDwords(const uint8_t* src, size_t src_stride, uint8_t* dst) {
  for (int r = 0; r < kRows; ++r) std::memcpy(dst + 4 * r, src + src_stride * r, 4);
}

// A 32-value block of 16 rows: their f16 scales (d, first in each row's block) to out as 16
// halves, and n_vectors vectors of their quantized bytes, from byte `qs` of the block on, to dst.
inline void PackBlock32(const uint8_t* b, size_t row_bytes, size_t qs, int n_vectors, uint8_t* out, uint8_t* dst) {
  for (int r = 0; r < kRows; ++r) std::memcpy(out + 2 * r, b + row_bytes * r, 2);
  for (int v = 0; v < n_vectors; ++v) InterleaveDwords(b + qs + 4 * v, row_bytes, dst + 64 * v);
}

// Q4_0 (288 bytes per block of 16 rows): d[16], then 4 vectors of nibbles.
constexpr int kQ4_0Bytes = 288;
inline void PackQ4_0Block(const uint8_t* b, size_t row_bytes, uint8_t* out) {
  PackBlock32(b, row_bytes, offsetof(BlockQ4_0, qs), 4, out, out + 32);
}

// The fifth bits of a 32-value block of 16 rows (Q5_0, Q5_1) as 8 64-bit masks at out: per vector m
// of Q4_0's layout the mask of values 4m.. then of values 16 + 4m.. (bit 4r + b: row r's value b).
template <class Block>
void PackFifthBits(const uint8_t* b, size_t row_bytes, uint8_t* out) {
  uint64_t masks[8] = {};
  for (int r = 0; r < kRows; ++r) {
    const Block& blk = *reinterpret_cast<const Block*>(b + row_bytes * r);
    uint32_t qh;
    std::memcpy(&qh, blk.qh, 4);
    for (int m = 0; m < 4; ++m) {
      for (int k = 0; k < 4; ++k) {
        masks[2 * m] |= static_cast<uint64_t>((qh >> (4 * m + k)) & 1) << (4 * r + k);
        masks[2 * m + 1] |= static_cast<uint64_t>((qh >> (16 + 4 * m + k)) & 1) << (4 * r + k);
      }
    }
  }
  std::memcpy(out, masks, sizeof(masks));
}

// Q5_0 (352 bytes): d[16], the fifth bits' masks, then Q4_0's 4 vectors of nibbles.
constexpr int kQ5_0Bytes = 352, kQ5_0Masks = 32, kQ5_0Qs = 96;
inline void PackQ5_0Block(const uint8_t* b, size_t row_bytes, uint8_t* out) {
  PackBlock32(b, row_bytes, offsetof(BlockQ5_0, qs), 4, out, out + kQ5_0Qs);
  PackFifthBits<BlockQ5_0>(b, row_bytes, out + kQ5_0Masks);
}

// Q4_1 (320 bytes) and Q5_1 (384 bytes): Q4_0's and Q5_0's layouts with the rows' f16 mins m[16]
// after d[16] (w = d q + m).
inline void PackMins(const uint8_t* b, size_t row_bytes, uint8_t* out) {
  for (int r = 0; r < kRows; ++r) std::memcpy(out + 2 * r, b + row_bytes * r + 2, 2);
}
constexpr int kQ4_1Bytes = 320, kQ4_1Qs = 64;
inline void PackQ4_1Block(const uint8_t* b, size_t row_bytes, uint8_t* out) {
  PackBlock32(b, row_bytes, offsetof(BlockQ4_1, qs), 4, out, out + kQ4_1Qs);
  PackMins(b, row_bytes, out + 32);
}
constexpr int kQ5_1Bytes = 384, kQ5_1Masks = 64, kQ5_1Qs = 128;
inline void PackQ5_1Block(const uint8_t* b, size_t row_bytes, uint8_t* out) {
  PackBlock32(b, row_bytes, offsetof(BlockQ5_1, qs), 4, out, out + kQ5_1Qs);
  PackMins(b, row_bytes, out + 32);
  PackFifthBits<BlockQ5_1>(b, row_bytes, out + kQ5_1Masks);
}

// Q8_0 (544 bytes): d[16], then 8 vectors of q + 128 (unsigned: vpdpbusd's weight operand).
constexpr int kQ8_0Bytes = 544;
inline void PackQ8_0Block(const uint8_t* b, size_t row_bytes, uint8_t* out) {
  PackBlock32(b, row_bytes, offsetof(BlockQ8_0, qs), 8, out, out + 32);
  for (int i = 32; i < kQ8_0Bytes; ++i) out[i] ^= 0x80;
}

// Q4_K and Q5_K's super-block header (320 bytes): d[16], dmin[16], scale[8 slices][16],
// min[4 slice pairs][16 rows][2].
constexpr int kScaleMinScales = 64, kScaleMinMins = 192, kScaleMinHeader = 320;
template <class Block>
void PackScaleMinHeader(const uint8_t* b, size_t row_bytes, uint8_t* out) {
  for (int r = 0; r < kRows; ++r) {
    const Block& blk = *reinterpret_cast<const Block*>(b + row_bytes * r);
    std::memcpy(out + 2 * r, &blk.d, 2);
    std::memcpy(out + 32 + 2 * r, &blk.dmin, 2);
    for (int s = 0; s < 8; ++s) {
      uint8_t sc, m;
      UnpackScaleMinK4(s, blk.scales, &sc, &m);
      out[kScaleMinScales + kRows * s + r] = sc;
      out[kScaleMinMins + 32 * (s / 2) + 2 * r + s % 2] = m;
    }
  }
}

// Q4_K's and Q5_K's nibbles: 4 chunks of 8 vectors from byte `at` of the packed super-block.
template <class Block>
void PackScaleMinNibbles(const uint8_t* b, size_t row_bytes, uint8_t* at) {
  for (int c = 0; c < 4; ++c) {
    for (int m = 0; m < 8; ++m) InterleaveDwords(b + offsetof(Block, qs) + 32 * c + 4 * m, row_bytes, at + 512 * c + 64 * m);
  }
}

constexpr int kQ4_KBytes = 2368;
inline void PackQ4_K(const uint8_t* rows, size_t row_bytes, int64_t n_blocks, uint8_t* out) {
  for (int64_t i = 0; i < n_blocks; ++i, out += kQ4_KBytes) {
    const uint8_t* b = rows + i * sizeof(BlockQ4_K);
    PackScaleMinHeader<BlockQ4_K>(b, row_bytes, out);
    PackScaleMinNibbles<BlockQ4_K>(b, row_bytes, out + kScaleMinHeader);
  }
}

// Q5_K: the header, then 64-bit masks [chunk c][vector m][slice 2c, 2c + 1] (bit 4r + b: the fifth
// bit of row r's value 4m + b of the slice), then Q4_K's nibbles.
constexpr int kQ5_KBytes = 2880, kQ5_KMasks = kScaleMinHeader, kQ5_KQs = kScaleMinHeader + 512;
inline void PackQ5_K(const uint8_t* rows, size_t row_bytes, int64_t n_blocks, uint8_t* out) {
  for (int64_t i = 0; i < n_blocks; ++i, out += kQ5_KBytes) {
    const uint8_t* b = rows + i * sizeof(BlockQ5_K);
    PackScaleMinHeader<BlockQ5_K>(b, row_bytes, out);
    uint64_t masks[64] = {};
    for (int r = 0; r < kRows; ++r) {
      const BlockQ5_K& blk = *reinterpret_cast<const BlockQ5_K*>(b + row_bytes * r);
      for (int l = 0; l < 32; ++l) {  // qh[l]: bit s for value l of slice s
        const int m = l / 4, bit = 4 * r + l % 4;
        for (int s = 0; s < 8; ++s) {
          masks[2 * (8 * (s / 2) + m) + s % 2] |= static_cast<uint64_t>((blk.qh[l] >> s) & 1) << bit;
        }
      }
    }
    std::memcpy(out + kQ5_KMasks, masks, sizeof(masks));
    PackScaleMinNibbles<BlockQ5_K>(b, row_bytes, out + kQ5_KQs);
  }
}

// Q6_K (3360 bytes): d[16], scale[16 groups][16] (int8), then per half h of 128 values 8 triples
// of vectors (192 bytes each): bytes 4m.. of ql 64h.., of ql 64h + 32.. and of qh 32h...
constexpr int kQ6_KBytes = 3360, kQ6_KScales = 32, kQ6_KQ = 288, kQ6_KTriple = 192;
inline void PackQ6_K(const uint8_t* rows, size_t row_bytes, int64_t n_blocks, uint8_t* out) {
  for (int64_t i = 0; i < n_blocks; ++i, out += kQ6_KBytes) {
    const uint8_t* b = rows + i * sizeof(BlockQ6_K);
    for (int r = 0; r < kRows; ++r) {
      const BlockQ6_K& blk = *reinterpret_cast<const BlockQ6_K*>(b + row_bytes * r);
      std::memcpy(out + 2 * r, &blk.d, 2);
      for (int grp = 0; grp < 16; ++grp) std::memcpy(out + kQ6_KScales + kRows * grp + r, &blk.scales[grp], 1);
    }
    for (int h = 0; h < 2; ++h) {
      uint8_t* half = out + kQ6_KQ + 1536 * h;
      for (int m = 0; m < 8; ++m) {
        uint8_t* triple = half + kQ6_KTriple * m;
        InterleaveDwords(b + offsetof(BlockQ6_K, ql) + 64 * h + 4 * m, row_bytes, triple);
        InterleaveDwords(b + offsetof(BlockQ6_K, ql) + 64 * h + 32 + 4 * m, row_bytes, triple + 64);
        InterleaveDwords(b + offsetof(BlockQ6_K, qh) + 32 * h + 4 * m, row_bytes, triple + 128);
      }
    }
  }
}

}  // namespace gemlet::packed_x86
