#pragma once
// Image files for Stable Diffusion: PNG, JPEG and WebP read (init images, inpainting masks, the
// image worker's uploads) and PNG written with text chunks (A1111's "parameters"), through Debian's
// libpng, libjpeg-turbo and libwebp. The format is told by the data's signature, never by a name.
//
// Decoded images are 8-bit RGB, as Pillow's Image.convert("RGB") gives them to A1111:
//   - gray is repeated into R, G and B; 1, 2 and 4-bit samples are scaled to 8 bits;
//   - 16-bit samples keep their high byte (as Pillow reads 16-bit RGB);
//   - palette indices become their colours;
//   - alpha, and tRNS transparency, is dropped, not composited: a transparent pixel gives the
//     colour stored under it. (A1111 flattens an RGBA img2img init image onto its background
//     colour, white by default, before converting; a caller that wants that composites itself.)
//   - no colour management: ICC profiles and gAMA are ignored, as Pillow ignores them;
//   - JPEG through libjpeg's defaults (accurate integer IDCT, smooth chroma upsampling), as
//     Pillow and djpeg decode; CMYK and YCCK JPEGs are refused;
//   - WebP: still images, lossy or lossless; animations are refused.
// Masks are one channel: the RGB's luma as Pillow's convert("L") computes it, ITU-R 601-2 in
// 16-bit fixed point, L = (R*19595 + G*38470 + B*7471 + 0x8000) >> 16 (gray stays exact). A1111's
// create_binary_mask takes the alpha channel instead when an RGBA mask is not fully opaque; here
// it is always the luma.
//
// Every failure (empty, unknown, corrupt or truncated data, a size past the limits below,
// libpng's and libjpeg's own errors) throws rf::Error whose message starts with the name given:
// the path, or what the caller calls the data ("init image"). No memory for pixels is allocated
// before the image's size has passed the limits.
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace rf {

// A side longer than 16384 or more than 2^26 pixels (8192x8192, 192 MiB as RGB) is refused: far
// past what Stable Diffusion makes, and a few kilobytes of PNG can claim a gigabyte otherwise.
inline constexpr std::uint32_t kMaxImageSide = 16384;
inline constexpr std::uint64_t kMaxImagePixels = std::uint64_t{1} << 26;

struct Image {
  int width = 0;
  int height = 0;
  int channels = 3;                  // 3: RGB; 1: gray (masks); 4: RGBA (written, and read by decode_alpha)
  std::vector<std::uint8_t> pixels;  // rows top to bottom, channels interleaved
};

// A PNG text chunk. The keyword is 1 to 79 printable Latin-1 characters (no leading, trailing or
// double spaces); both are UTF-8 here.
struct PngText {
  std::string key;
  std::string text;

  bool operator==(const PngText&) const = default;
};

enum class ImageFormat { png, jpeg, webp };

// The format of `data` by its signature; fails for anything else, naming its first bytes.
ImageFormat detect_image_format(std::span<const std::uint8_t> data, std::string_view name);

Image decode_image(std::span<const std::uint8_t> data, std::string_view name);  // RGB
Image decode_mask(std::span<const std::uint8_t> data, std::string_view name);   // gray
// A PNG's alpha channel (its tRNS transparency included) as one channel; nullopt for a PNG without
// one, and for JPEG and WebP (read as opaque).
std::optional<Image> decode_alpha(std::span<const std::uint8_t> data, std::string_view name);
Image read_image(const std::string& path);
Image read_mask(const std::string& path);

// An 8-bit RGB, RGBA or gray PNG. Each text goes in a tEXt chunk when it is Latin-1 and in an
// uncompressed iTXt chunk (UTF-8) when it is not, before the image data, as Pillow's PngInfo
// add_text writes A1111's "parameters". Fails naming `name` for an image or text it cannot write.
std::vector<std::uint8_t> encode_png(const Image& image, const std::vector<PngText>& texts = {},
                                     std::string_view name = "PNG image");
void write_png(const std::string& path, const Image& image, const std::vector<PngText>& texts = {});

// The text chunks of a PNG (tEXt, zTXt and iTXt, before and after the image data) in file order,
// Latin-1 turned into UTF-8. An iTXt that is not valid UTF-8 is skipped, as Pillow skips it. The
// whole file is decoded, so a PNG whose pixels are corrupt fails here too.
std::vector<PngText> decode_png_texts(std::span<const std::uint8_t> data, std::string_view name);
std::vector<PngText> read_png_texts(const std::string& path);

}  // namespace rf
