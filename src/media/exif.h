// EXIF orientation: a small bounds-checked TIFF reader for IFD0's Orientation tag, and the flips and
// rotations that put the pixels upright as PIL's ImageOps.exif_transpose does.
#pragma once

#include <cstdint>
#include <span>

#include "media/image.h"

namespace gemlet::media {

// The Orientation (tag 0x0112) of an EXIF block: TIFF bytes ("II*\0" or "MM\0*"), optionally after
// the "Exif\0\0" header a JPEG APP1 segment carries. 1 (upright) when the block, IFD0 or the tag is
// missing, malformed or out of 1..8: a bad EXIF block never fails a decode, as in PIL.
int ExifOrientation(std::span<const uint8_t> exif);

// Applies an EXIF orientation (1-8) to `image`: 2 mirrors left-right, 3 turns 180 degrees, 4
// mirrors top-bottom, 5 transposes, 6 turns 90 degrees clockwise, 7 transverses, 8 turns 90 degrees
// counter-clockwise (5-8 swap width and height). Other values leave it as it is.
void ApplyExifOrientation(Image& image, int orientation);

}  // namespace gemlet::media
