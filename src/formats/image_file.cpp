#include "formats/image_file.h"

// clang-format off
#include <cstdio>  // jpeglib.h needs FILE and size_t first
#include <jpeglib.h>
#include <jerror.h>
// clang-format on
#include <png.h>
#include <utf8proc.h>
#include <webp/decode.h>

#include <algorithm>
#include <cerrno>
#include <csetjmp>
#include <cstring>
#include <fstream>
#include <optional>

#include "util/error.h"
#include "util/mapped_file.h"

// libpng and libjpeg report errors through callbacks that must not return. Here they keep the
// message and longjmp back to guarded(), whose step only calls into the library: the jump skips no
// C++ object with a destructor, guarded() throws rf::Error from its own frame, and the RAII owners
// (PngState, JpegReader) free the library's state.

namespace rf {
namespace {

bool has_at(std::span<const std::uint8_t> data, std::size_t offset, std::string_view bytes) {
  return data.size() >= offset + bytes.size() && std::equal(bytes.begin(), bytes.end(), data.begin() + offset,
                                                            [](char a, std::uint8_t b) { return static_cast<std::uint8_t>(a) == b; });
}

// Refuses a size past the limits, before anything is allocated for it.
void check_size(std::string_view name, std::uint64_t width, std::uint64_t height) {
  if (width == 0 || height == 0) fail("{}: the image is {}x{}: it has no pixels", name, width, height);
  if (width > kMaxImageSide || height > kMaxImageSide) {
    fail("{}: the image is {}x{}, past the limit of {} pixels a side", name, width, height, kMaxImageSide);
  }
  if (width * height > kMaxImagePixels) {
    fail("{}: the image is {}x{}, {} pixels, past the limit of {}", name, width, height, width * height,
         kMaxImagePixels);
  }
}

Image rgb_image(std::uint64_t width, std::uint64_t height) {
  return {static_cast<int>(width), static_cast<int>(height), 3, std::vector<std::uint8_t>(width * height * 3)};
}

// Runs `step`, which only calls into libpng or libjpeg, with `jump` set to come back here. When
// the library longjmps back (its error callback having written `message`), throws rf::Error from
// this frame, past which the jump took nothing with a destructor.
template <typename Step>
void guarded(std::jmp_buf& jump, std::string_view name, std::string_view format, const char* message, Step& step) {
  if (setjmp(jump)) fail("{}: {}: {}", name, format, message);
  step();
}

// ---- text: PNG keeps Latin-1 in tEXt/zTXt and UTF-8 in iTXt ----

bool is_valid_utf8(std::string_view text) {
  const auto* bytes = reinterpret_cast<const utf8proc_uint8_t*>(text.data());
  for (std::size_t pos = 0; pos < text.size();) {
    utf8proc_int32_t code_point;
    const auto length = utf8proc_iterate(bytes + pos, static_cast<utf8proc_ssize_t>(text.size() - pos), &code_point);
    if (length < 0) return false;
    pos += static_cast<std::size_t>(length);
  }
  return true;
}

// Valid UTF-8 `text` in Latin-1, or nothing where it holds a character past U+00FF.
std::optional<std::string> latin1_of(std::string_view text) {
  std::string out;
  const auto* bytes = reinterpret_cast<const utf8proc_uint8_t*>(text.data());
  for (std::size_t pos = 0; pos < text.size();) {
    utf8proc_int32_t code_point;
    pos += static_cast<std::size_t>(utf8proc_iterate(bytes + pos, static_cast<utf8proc_ssize_t>(text.size() - pos), &code_point));
    if (code_point > 0xFF) return std::nullopt;
    out += static_cast<char>(code_point);
  }
  return out;
}

std::string utf8_of_latin1(std::string_view text) {
  std::string out;
  for (const char c : text) {
    utf8proc_uint8_t encoded[4];
    const auto length = utf8proc_encode_char(static_cast<std::uint8_t>(c), encoded);
    out.append(reinterpret_cast<const char*>(encoded), static_cast<std::size_t>(length));
  }
  return out;
}

// The PNG spec's keyword: 1-79 Latin-1 characters, printable, no leading, trailing or double space.
bool is_png_keyword(std::string_view key) {
  const auto printable = [](char c) {
    const auto b = static_cast<std::uint8_t>(c);
    return (b >= 32 && b <= 126) || b >= 161;
  };
  return !key.empty() && key.size() <= 79 && std::all_of(key.begin(), key.end(), printable) && key.front() != ' ' &&
         key.back() != ' ' && key.find("  ") == std::string_view::npos;
}

// A text as it goes into its chunk: Latin-1 for tEXt, or UTF-8 for iTXt.
struct ChunkText {
  std::string key;
  std::string text;
  bool international;
};

ChunkText chunk_text(const PngText& entry, std::string_view name) {
  const auto key = is_valid_utf8(entry.key) ? latin1_of(entry.key) : std::nullopt;
  if (!key || !is_png_keyword(*key)) {
    fail("{}: PNG text keyword '{}' is not 1 to 79 printable Latin-1 characters without leading, trailing or "
         "double spaces",
         name, entry.key);
  }
  if (!is_valid_utf8(entry.text)) fail("{}: PNG text '{}' is not valid UTF-8", name, entry.key);
  // libpng measures texts with strlen.
  if (entry.text.find('\0') != std::string::npos) fail("{}: PNG text '{}' holds a NUL character", name, entry.key);
  auto latin1 = latin1_of(entry.text);
  return latin1 ? ChunkText{*key, std::move(*latin1), false} : ChunkText{*key, entry.text, true};
}

// ---- PNG ----

struct PngErrors {
  char message[256] = "";
};

[[noreturn]] void png_error_to_guard(png_structp png, png_const_charp message) {
  auto* errors = static_cast<PngErrors*>(png_get_error_ptr(png));
  std::snprintf(errors->message, sizeof errors->message, "%s", message);
  png_longjmp(png, 1);
}

void png_ignore_warning(png_structp, png_const_charp) {}

struct MemoryReader {
  std::span<const std::uint8_t> data;
  std::size_t offset = 0;
};

void read_from_memory(png_structp png, png_bytep out, std::size_t length) {
  auto* reader = static_cast<MemoryReader*>(png_get_io_ptr(png));
  if (length > reader->data.size() - reader->offset) png_error(png, "the data ends early: the file is truncated");
  std::memcpy(out, reader->data.data() + reader->offset, length);
  reader->offset += length;
}

// libpng's state for reading or for writing, freed on every path out.
enum class PngMode { read, write };

template <PngMode mode>
class PngState {
 public:
  explicit PngState(std::string_view name) : name_(name) {
    png_ = mode == PngMode::read
               ? png_create_read_struct(PNG_LIBPNG_VER_STRING, &errors_, png_error_to_guard, png_ignore_warning)
               : png_create_write_struct(PNG_LIBPNG_VER_STRING, &errors_, png_error_to_guard, png_ignore_warning);
    if (png_) info_ = png_create_info_struct(png_);
    if (!info_) {
      destroy();
      fail("{}: PNG: out of memory", name);
    }
  }
  ~PngState() { destroy(); }
  PngState(const PngState&) = delete;
  PngState& operator=(const PngState&) = delete;

  png_structp png() const { return png_; }
  png_infop info() const { return info_; }
  template <typename Step>
  void guarded(Step&& step) {
    rf::guarded(png_jmpbuf(png_), name_, "PNG", errors_.message, step);
  }

 private:
  void destroy() {
    if (mode == PngMode::read) {
      png_destroy_read_struct(&png_, &info_, nullptr);
    } else {
      png_destroy_write_struct(&png_, &info_);
    }
  }

  std::string_view name_;
  PngErrors errors_;
  png_structp png_ = nullptr;
  png_infop info_ = nullptr;
};

struct PngContents {
  Image image;
  std::vector<PngText> texts;
  std::optional<Image> alpha;  // one channel, where the PNG has alpha or tRNS
};

std::vector<PngText> png_texts(png_structp png, png_infop info) {
  png_textp texts = nullptr;
  const int count = png_get_text(png, info, &texts, nullptr);
  std::vector<PngText> out;
  for (int i = 0; i < count; ++i) {
    const png_text& t = texts[i];
    const bool international = t.compression == PNG_ITXT_COMPRESSION_NONE || t.compression == PNG_ITXT_COMPRESSION_zTXt;
    const std::string_view text(t.text, international ? t.itxt_length : t.text_length);
    if (international && !is_valid_utf8(text)) continue;
    out.push_back({utf8_of_latin1(t.key), international ? std::string(text) : utf8_of_latin1(text)});
  }
  return out;
}

// The whole file: pixels as RGB, then the text chunks (those after the image data too).
PngContents read_png(std::span<const std::uint8_t> data, std::string_view name) {
  PngState<PngMode::read> reader(name);
  png_structp png = reader.png();
  png_infop info = reader.info();
  MemoryReader source{data};
  reader.guarded([&] {
    png_set_read_fn(png, &source, read_from_memory);
    png_read_info(png, info);
  });
  const std::uint32_t width = png_get_image_width(png, info), height = png_get_image_height(png, info);
  check_size(name, width, height);
  // Palette to RGB, tRNS to alpha, 1/2/4 bits to 8, 16 bits to their high byte, gray to RGB.
  reader.guarded([&] {
    png_set_expand(png);
    png_set_strip_16(png);
    png_set_gray_to_rgb(png);
    png_set_interlace_handling(png);
    png_read_update_info(png, info);
  });
  const std::size_t channels = png_get_channels(png, info), row_bytes = png_get_rowbytes(png, info);
  if ((channels != 3 && channels != 4) || row_bytes != width * channels) {
    fail("{}: PNG: libpng gave {} channels in rows of {} bytes, not RGB(A)", name, channels, row_bytes);
  }
  std::vector<std::uint8_t> decoded(row_bytes * height);
  std::vector<png_bytep> rows(height);
  for (std::size_t y = 0; y < height; ++y) rows[y] = decoded.data() + y * row_bytes;
  reader.guarded([&] {
    png_read_image(png, rows.data());
    png_read_end(png, info);
  });
  PngContents contents{rgb_image(width, height), png_texts(png, info), {}};
  if (channels == 4) contents.alpha = Image{static_cast<int>(width), static_cast<int>(height), 1, {}};
  for (std::size_t i = 0, n = std::size_t{width} * height; i < n; ++i) {
    std::memcpy(&contents.image.pixels[i * 3], &decoded[i * channels], 3);
    if (channels == 4) contents.alpha->pixels.push_back(decoded[i * channels + 3]);
  }
  return contents;
}

struct MemoryWriter {
  std::vector<std::uint8_t> bytes;
  bool out_of_memory = false;
};

void write_to_memory(png_structp png, png_bytep data, std::size_t length) {
  auto* writer = static_cast<MemoryWriter*>(png_get_io_ptr(png));
  // An exception must not cross libpng's C frames: a failed append is reported after it returns.
  try {
    if (!writer->out_of_memory) writer->bytes.insert(writer->bytes.end(), data, data + length);
  } catch (const std::bad_alloc&) {
    writer->out_of_memory = true;
  }
}

void flush_nothing(png_structp) {}

// ---- JPEG ----

// Progressive JPEGs may hold any number of scans, each a pass over the whole image: TurboJPEG's
// TJFLAG_LIMITSCANS stops at 500, and so does this, so that a small file cannot take minutes.
constexpr int kMaxJpegScans = 500;

struct JpegErrors {
  jpeg_error_mgr manager;  // first: libjpeg's callbacks get a pointer to it
  jpeg_progress_mgr progress;
  std::jmp_buf jump;
  char message[JMSG_LENGTH_MAX];
};

[[noreturn]] void jpeg_error_to_guard(j_common_ptr cinfo) {
  auto* errors = reinterpret_cast<JpegErrors*>(cinfo->err);
  cinfo->err->format_message(cinfo, errors->message);
  std::longjmp(errors->jump, 1);
}

// libjpeg only warns when the data ends early (it pads the image with gray) or a segment is cut
// short; Pillow refuses such a file as truncated, and so does this. Other warnings are ignored.
void jpeg_warning_to_guard(j_common_ptr cinfo, int level) {
  const int code = cinfo->err->msg_code;
  if (level < 0 && (code == JWRN_JPEG_EOF || code == JWRN_HIT_MARKER)) jpeg_error_to_guard(cinfo);
}

void jpeg_limit_scans(j_common_ptr cinfo) {
  if (reinterpret_cast<j_decompress_ptr>(cinfo)->input_scan_number <= kMaxJpegScans) return;
  auto* errors = reinterpret_cast<JpegErrors*>(cinfo->err);
  std::snprintf(errors->message, sizeof errors->message, "more than %d progressive scans", kMaxJpegScans);
  std::longjmp(errors->jump, 1);
}

class JpegReader {
 public:
  explicit JpegReader(std::string_view name) : name_(name) {
    cinfo_.err = jpeg_std_error(&errors_.manager);
    errors_.manager.error_exit = jpeg_error_to_guard;
    errors_.manager.emit_message = jpeg_warning_to_guard;
    errors_.progress.progress_monitor = jpeg_limit_scans;
  }
  ~JpegReader() { jpeg_destroy_decompress(&cinfo_); }
  JpegReader(const JpegReader&) = delete;
  JpegReader& operator=(const JpegReader&) = delete;

  jpeg_decompress_struct& cinfo() { return cinfo_; }
  // Creates the decompressor (here, where the destructor will free it) and reads the header.
  void read_header(std::span<const std::uint8_t> data) {
    guarded([&] {
      jpeg_create_decompress(&cinfo_);
      cinfo_.progress = &errors_.progress;
      jpeg_mem_src(&cinfo_, data.data(), data.size());
      jpeg_read_header(&cinfo_, TRUE);
    });
  }
  template <typename Step>
  void guarded(Step&& step) {
    rf::guarded(errors_.jump, name_, "JPEG", errors_.message, step);
  }

 private:

  std::string_view name_;
  JpegErrors errors_{};
  jpeg_decompress_struct cinfo_{};
};

Image decode_jpeg(std::span<const std::uint8_t> data, std::string_view name) {
  JpegReader reader(name);
  jpeg_decompress_struct& cinfo = reader.cinfo();
  reader.read_header(data);
  if (cinfo.jpeg_color_space == JCS_CMYK || cinfo.jpeg_color_space == JCS_YCCK) {
    fail("{}: a CMYK JPEG, which is not read here: convert it to RGB", name);
  }
  check_size(name, cinfo.image_width, cinfo.image_height);
  cinfo.out_color_space = JCS_RGB;
  reader.guarded([&] { jpeg_start_decompress(&cinfo); });
  if (cinfo.output_components != 3) fail("{}: JPEG: libjpeg gave {} components, not RGB", name, cinfo.output_components);
  Image image = rgb_image(cinfo.output_width, cinfo.output_height);
  const std::size_t stride = std::size_t{cinfo.output_width} * 3;
  reader.guarded([&] {
    while (cinfo.output_scanline < cinfo.output_height) {
      JSAMPROW row = image.pixels.data() + cinfo.output_scanline * stride;
      jpeg_read_scanlines(&cinfo, &row, 1);
    }
    jpeg_finish_decompress(&cinfo);
  });
  return image;
}

// ---- WebP ----

std::string_view webp_status(VP8StatusCode status) {
  switch (status) {
    case VP8_STATUS_OUT_OF_MEMORY: return "out of memory";
    case VP8_STATUS_INVALID_PARAM: return "invalid parameter";
    case VP8_STATUS_BITSTREAM_ERROR: return "the bitstream is corrupt";
    case VP8_STATUS_UNSUPPORTED_FEATURE: return "a feature libwebp does not support";
    case VP8_STATUS_NOT_ENOUGH_DATA: return "the data ends early: the file is truncated";
    default: return "libwebp failed";
  }
}

Image decode_webp(std::span<const std::uint8_t> data, std::string_view name) {
  WebPBitstreamFeatures features;
  const VP8StatusCode status = WebPGetFeatures(data.data(), data.size(), &features);
  if (status != VP8_STATUS_OK) fail("{}: WebP: {}", name, webp_status(status));
  if (features.has_animation) fail("{}: an animated WebP: only still images are read", name);
  check_size(name, static_cast<std::uint32_t>(features.width), static_cast<std::uint32_t>(features.height));
  Image image = rgb_image(features.width, features.height);
  if (!WebPDecodeRGBInto(data.data(), data.size(), image.pixels.data(), image.pixels.size(), features.width * 3)) {
    fail("{}: WebP: the image data is corrupt or truncated", name);
  }
  return image;
}

// Pillow's convert("L"): ITU-R 601-2 luma in 16-bit fixed point, rounded.
Image luma(const Image& rgb) {
  Image mask{rgb.width, rgb.height, 1, std::vector<std::uint8_t>(rgb.pixels.size() / 3)};
  for (std::size_t i = 0; i < mask.pixels.size(); ++i) {
    const std::uint8_t* p = &rgb.pixels[i * 3];
    mask.pixels[i] = static_cast<std::uint8_t>((p[0] * 19595u + p[1] * 38470u + p[2] * 7471u + 0x8000u) >> 16);
  }
  return mask;
}

void check_encodable(const Image& image, std::string_view name) {
  if (image.channels != 1 && image.channels != 3 && image.channels != 4) {
    fail("{}: {} channels: a PNG is written from RGB, RGBA or gray", name, image.channels);
  }
  if (image.width < 0 || image.height < 0) fail("{}: the image is {}x{}", name, image.width, image.height);
  check_size(name, static_cast<std::uint64_t>(image.width), static_cast<std::uint64_t>(image.height));
  const std::size_t expected = std::size_t(image.width) * image.height * image.channels;
  if (image.pixels.size() != expected) {
    fail("{}: {} bytes of pixels for {}x{}x{} ({} expected)", name, image.pixels.size(), image.width, image.height,
         image.channels, expected);
  }
}

}  // namespace

ImageFormat detect_image_format(std::span<const std::uint8_t> data, std::string_view name) {
  if (data.empty()) fail("{}: empty (0 bytes): not an image", name);
  if (has_at(data, 0, "\x89PNG\r\n\x1A\n")) return ImageFormat::png;
  if (has_at(data, 0, "\xFF\xD8\xFF")) return ImageFormat::jpeg;
  if (has_at(data, 0, "RIFF") && has_at(data, 8, "WEBP")) return ImageFormat::webp;
  std::string start;
  for (std::size_t i = 0; i < std::min<std::size_t>(data.size(), 8); ++i) start += fmt::format(" {:02x}", data[i]);
  fail("{}: not a PNG, JPEG or WebP image (it starts with{})", name, start);
}

Image decode_image(std::span<const std::uint8_t> data, std::string_view name) {
  switch (detect_image_format(data, name)) {
    case ImageFormat::png: return read_png(data, name).image;
    case ImageFormat::jpeg: return decode_jpeg(data, name);
    case ImageFormat::webp: return decode_webp(data, name);
  }
  fail("{}: unknown image format", name);
}

Image decode_mask(std::span<const std::uint8_t> data, std::string_view name) { return luma(decode_image(data, name)); }

std::optional<Image> decode_alpha(std::span<const std::uint8_t> data, std::string_view name) {
  if (detect_image_format(data, name) != ImageFormat::png) return std::nullopt;
  return read_png(data, name).alpha;
}

Image read_image(const std::string& path) {
  const MappedFile file(path);
  return decode_image({file.data(), file.size()}, path);
}

Image read_mask(const std::string& path) { return luma(read_image(path)); }

std::vector<std::uint8_t> encode_png(const Image& image, const std::vector<PngText>& texts, std::string_view name) {
  check_encodable(image, name);
  std::vector<ChunkText> chunks;
  for (const auto& text : texts) chunks.push_back(chunk_text(text, name));
  std::vector<png_text> entries(chunks.size());
  for (std::size_t i = 0; i < chunks.size(); ++i) {
    entries[i].compression = chunks[i].international ? PNG_ITXT_COMPRESSION_NONE : PNG_TEXT_COMPRESSION_NONE;
    entries[i].key = chunks[i].key.data();
    entries[i].text = chunks[i].text.data();
  }
  const std::size_t stride = std::size_t(image.width) * image.channels;
  std::vector<png_bytep> rows(image.height);
  for (std::size_t y = 0; y < rows.size(); ++y) rows[y] = const_cast<png_bytep>(image.pixels.data() + y * stride);
  MemoryWriter out;
  PngState<PngMode::write> writer(name);
  png_structp png = writer.png();
  png_infop info = writer.info();
  writer.guarded([&] {
    png_set_write_fn(png, &out, write_to_memory, flush_nothing);
    const int type = image.channels == 4 ? PNG_COLOR_TYPE_RGBA : image.channels == 3 ? PNG_COLOR_TYPE_RGB : PNG_COLOR_TYPE_GRAY;
    png_set_IHDR(png, info, image.width, image.height, 8, type,
                 PNG_INTERLACE_NONE, PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
    png_set_text(png, info, entries.data(), static_cast<int>(entries.size()));
    // zlib's fastest level: a server encodes every image it makes, and level 6 took about three
    // times as long for files a sixth smaller (docs/perf_history.md, issue #24).
    png_set_compression_level(png, 1);
    png_write_info(png, info);
    png_write_image(png, rows.data());
    png_write_end(png, nullptr);
  });
  if (out.out_of_memory) fail("{}: PNG: out of memory", name);
  return std::move(out.bytes);
}

void write_png(const std::string& path, const Image& image, const std::vector<PngText>& texts) {
  const auto bytes = encode_png(image, texts, path);
  std::ofstream file(path, std::ios::binary | std::ios::trunc);
  file.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  file.close();
  if (!file) fail("{}: cannot write: {}", path, std::strerror(errno));
}

std::vector<PngText> decode_png_texts(std::span<const std::uint8_t> data, std::string_view name) {
  if (detect_image_format(data, name) != ImageFormat::png) fail("{}: not a PNG: only PNGs hold text chunks here", name);
  return read_png(data, name).texts;
}

std::vector<PngText> read_png_texts(const std::string& path) {
  const MappedFile file(path);
  return decode_png_texts({file.data(), file.size()}, path);
}

}  // namespace rf
