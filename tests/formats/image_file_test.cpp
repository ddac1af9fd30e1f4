// Image files against references that share no code with libpng: PNGs of every colour type, bit
// depth and interlacing written by tools/fixtures/png_stdlib.py (zlib and struct only), JPEGs and
// WebPs with the pixels djpeg, dwebp or the lossless source give (tests/fixtures/images, made by
// make_image_fixtures.py); rocmforge's PNGs read back by png_stdlib.py; and bad data of every kind
// refused with rf::Error, never a crash. Pixels must match exactly: the printed errors are the
// largest byte difference, against a tolerance of 0.
#include "formats/image_file.h"

#include <algorithm>
#include <array>
#include <fstream>
#include <nlohmann/json.hpp>

#include "formats/test_helpers.h"
#include "run_command.h"

namespace rf {
namespace {

const std::string kImages = std::string(ROCMFORGE_FIXTURES) + "/images/";

const nlohmann::json& expected() {
  static const nlohmann::json manifest = nlohmann::json::parse(std::ifstream(kImages + "expected.json"));
  return manifest;
}

std::vector<std::uint8_t> from_hex(const std::string& hex) {
  std::vector<std::uint8_t> bytes(hex.size() / 2);
  for (std::size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<std::uint8_t>(std::stoi(hex.substr(2 * i, 2), nullptr, 16));
  return bytes;
}

// Prints the largest byte difference against a tolerance of 0, and fails past it.
void check_pixels(const std::string& what, const Image& got, int channels, const std::vector<std::uint8_t>& want) {
  ASSERT_EQ(got.channels, channels) << what;
  ASSERT_EQ(got.pixels.size(), want.size()) << what;
  int worst = 0;
  for (std::size_t i = 0; i < want.size(); ++i) worst = std::max(worst, std::abs(int(got.pixels[i]) - int(want[i])));
  fmt::print("  {:<40} largest difference {:3}  tolerance 0{}\n", what, worst, worst == 0 ? "" : "  FAIL");
  EXPECT_EQ(worst, 0) << what;
}

Image test_image(int width, int height, int channels, std::uint32_t seed) {
  return {width, height, channels, test::random_bytes(std::size_t(width) * height * channels, seed)};
}

TEST(ImageFile, DecodesEveryFixtureAsTheReferenceDoes) {
  ASSERT_GE(expected()["images"].size(), 21u);
  for (const auto& [name, entry] : expected()["images"].items()) {
    const std::string path = kImages + entry["file"].get<std::string>();
    const Image rgb = read_image(path);
    EXPECT_EQ(rgb.width, entry["width"]) << name;
    EXPECT_EQ(rgb.height, entry["height"]) << name;
    check_pixels(name + " RGB", rgb, 3, from_hex(entry["rgb"]));
    check_pixels(name + " mask", read_mask(path), 1, from_hex(entry["gray"]));
  }
}

TEST(ImageFile, TellsTheFormatBySignatureNotName) {
  const auto png = test::read_bytes(kImages + "rgb8.png");
  const auto jpeg = test::read_bytes(kImages + "jpeg_420.jpg");
  const auto webp = test::read_bytes(kImages + "webp_lossy.webp");
  EXPECT_EQ(detect_image_format(png, "a.jpg"), ImageFormat::png);
  EXPECT_EQ(detect_image_format(jpeg, "a.webp"), ImageFormat::jpeg);
  EXPECT_EQ(detect_image_format(webp, "a.png"), ImageFormat::webp);
  const Image image = decode_image(jpeg, "upload.png");
  check_pixels("JPEG named .png", image, 3, from_hex(expected()["images"]["jpeg_420"]["rgb"]));
}

TEST(ImageFile, ReadsTextChunksInFileOrder) {
  for (const auto& [file, texts] : expected()["texts"].items()) {
    std::vector<PngText> want;
    for (const auto& t : texts) want.push_back({t[0], t[1]});
    EXPECT_EQ(read_png_texts(kImages + file), want) << file;
  }
  EXPECT_TRUE(read_png_texts(kImages + "rgb8.png").empty());
}

TEST(ImageFile, EncodedPngDecodesToTheSamePixelsAndTexts) {
  const std::vector<PngText> texts = {{"parameters", "a caf\u00e9\nSteps: 20, Seed: 1"},
                                      {"Title", "\u732b\u306e\u5199\u771f \U0001f431"},
                                      {"Empty", ""}};
  for (const Image& image : {test_image(37, 23, 3, 1), test_image(5, 64, 1, 2), test_image(1, 1, 3, 3)}) {
    const auto png = encode_png(image, texts);
    const std::string what = fmt::format("{}x{}x{} round trip", image.width, image.height, image.channels);
    const Image back = decode_image(png, what);
    // A gray PNG comes back as RGB with the gray repeated.
    std::vector<std::uint8_t> want;
    for (const auto v : image.pixels) want.insert(want.end(), image.channels == 1 ? 3 : 1, v);
    check_pixels(what, back, 3, want);
    EXPECT_EQ(decode_png_texts(png, what), texts);
  }
}

test::CommandRun run_png_stdlib(const std::string& arguments) {
  return test::run_command("python3 " + std::string(ROCMFORGE_SOURCE_DIR) + "/tools/fixtures/png_stdlib.py " + arguments + " 2>&1");
}

class ImageFileScratch : public test::ScratchTest {};

// tEXt for Latin-1 and iTXt otherwise, before the image data, as Pillow writes A1111's parameters.
TEST_F(ImageFileScratch, IndependentReaderReadsOurPng) {
  const std::string latin1 = "a cat in a caf\u00e9, \"quoted\"\nNegative prompt: dog\nSteps: 20, Sampler: Euler a";
  const std::string japanese = "\u732b\u306e\u5199\u771f, \U0001f431\nSteps: 20";
  for (const Image& image : {test_image(29, 17, 3, 4), test_image(13, 7, 1, 5), test_image(11, 6, 4, 9)}) {
    const std::string png = path("ours.png"), raw = path("ours.raw");
    write_png(png, image, {{"parameters", latin1}, {"Comment", japanese}});
    const test::CommandRun run = run_png_stdlib("decode " + png + " " + raw);
    ASSERT_EQ(run.exit_code, 0) << run.output;
    const auto info = nlohmann::json::parse(run.output);
    EXPECT_EQ(info["width"], image.width);
    EXPECT_EQ(info["height"], image.height);
    EXPECT_EQ(info["channels"], image.channels);
    const auto chunks = info["chunks"].get<std::vector<std::string>>();
    ASSERT_GE(chunks.size(), 5u);
    EXPECT_EQ(chunks[1], "tEXt");
    EXPECT_EQ(chunks[2], "iTXt");
    EXPECT_EQ(chunks[3], "IDAT");
    EXPECT_EQ(info["texts"], nlohmann::json::array({nlohmann::json::array({"tEXt", "parameters", latin1}),
                                                    nlohmann::json::array({"iTXt", "Comment", japanese})}));
    Image theirs{image.width, image.height, image.channels, test::read_bytes(raw)};
    check_pixels(fmt::format("png_stdlib.py reads our {}-channel PNG", image.channels), theirs, image.channels, image.pixels);
  }
}

// OpenAI's edits read masks by transparency: the alpha of an RGBA PNG as png_stdlib.py reads it,
// present (not checked by value) where tRNS gives it, and absent without either, or for JPEG.
TEST_F(ImageFileScratch, ReadsAlphaAsTheIndependentReaderDoes) {
  const std::string raw = path("rgba8.raw");
  const test::CommandRun run = run_png_stdlib("decode " + kImages + "rgba8.png " + raw);
  ASSERT_EQ(run.exit_code, 0) << run.output;
  ASSERT_EQ(nlohmann::json::parse(run.output)["channels"], 4);
  const std::vector<std::uint8_t> rgba = test::read_bytes(raw);
  std::vector<std::uint8_t> alpha;
  for (std::size_t i = 3; i < rgba.size(); i += 4) alpha.push_back(rgba[i]);
  const auto read = decode_alpha(test::read_bytes(kImages + "rgba8.png"), "rgba8.png");
  ASSERT_TRUE(read.has_value());
  check_pixels("rgba8.png alpha", *read, 1, alpha);
  EXPECT_TRUE(decode_alpha(test::read_bytes(kImages + "palette4_trns.png"), "palette4_trns.png").has_value());
  EXPECT_FALSE(decode_alpha(test::read_bytes(kImages + "rgb8.png"), "rgb8.png").has_value());
  EXPECT_FALSE(decode_alpha(test::read_bytes(kImages + "jpeg_420.jpg"), "jpeg_420.jpg").has_value());
}

TEST(ImageFile, RefusesEmptyAndUnknownData) {
  EXPECT_RF_ERROR(decode_image({}, "upload"), "upload", "empty");
  EXPECT_RF_ERROR(decode_image(test::random_bytes(100, 1), "upload"), "upload", "not a PNG, JPEG or WebP");
  EXPECT_RF_ERROR(decode_png_texts(test::read_bytes(kImages + "jpeg_420.jpg"), "x"), "x", "not a PNG");
  EXPECT_RF_ERROR(read_image(kImages + "missing.png"), kImages + "missing.png", "cannot open");
}

// Each file's bytes from `offset` on replaced by `with`, or cut there when `with` is empty.
std::vector<std::uint8_t> damaged(std::vector<std::uint8_t> bytes, std::size_t offset, std::string_view with = {}) {
  if (with.empty()) bytes.resize(offset);
  for (std::size_t i = 0; i < with.size(); ++i) bytes.at(offset + i) = static_cast<std::uint8_t>(with[i]);
  return bytes;
}

TEST(ImageFile, RefusesCorruptPng) {
  const auto png = test::read_bytes(kImages + "rgb8.png");
  EXPECT_RF_ERROR(decode_image(damaged(png, png.size() / 2), "half"), "half", "PNG", "truncated");
  EXPECT_RF_ERROR(decode_image(damaged(png, 29, "\x12\x34"), "ihdr crc"), "ihdr crc", "PNG", "CRC");
  EXPECT_RF_ERROR(decode_image(damaged(png, 50, "\xAB\xCD"), "idat"), "idat", "PNG");
  auto noise = test::random_bytes(300, 2);
  std::copy(png.begin(), png.begin() + 8, noise.begin());
  EXPECT_RF_ERROR(decode_image(noise, "noise"), "noise", "PNG");
}

TEST(ImageFile, RefusesSizesPastTheLimitsAndAnimations) {
  for (const auto& [file, words] : expected()["refused"].items()) {
    try {
      read_image(kImages + file);
      ADD_FAILURE() << file << " was read";
    } catch (const Error& e) {
      const std::string message = e.what();
      EXPECT_TRUE(message.starts_with(kImages + file + ": ")) << message;
      for (const auto& word : words) EXPECT_NE(message.find(word.get<std::string>()), std::string::npos) << message;
    }
  }
  EXPECT_RF_ERROR(read_image(kImages + "huge_height.png"), kImages + "huge_height.png", std::to_string(kMaxImageSide));
  EXPECT_RF_ERROR(read_image(kImages + "huge_area.png"), kImages + "huge_area.png", std::to_string(kMaxImagePixels));
  // A JPEG's frame header claiming 60000x60000 (JPEG allows 65535 a side).
  auto jpeg = test::read_bytes(kImages + "jpeg_420.jpg");
  const std::array<std::uint8_t, 2> marker = {0xFF, 0xC0};
  const auto sof = std::search(jpeg.begin(), jpeg.end(), marker.begin(), marker.end());
  ASSERT_NE(sof, jpeg.end());
  const std::size_t at = static_cast<std::size_t>(sof - jpeg.begin()) + 5;  // marker, length, precision
  EXPECT_RF_ERROR(decode_image(damaged(jpeg, at, "\xEA\x60\xEA\x60"), "big"), "big", "60000x60000", "limit");
}

TEST(ImageFile, RefusesCorruptJpegAndWebp) {
  const auto jpeg = test::read_bytes(kImages + "jpeg_444_progressive.jpg");
  EXPECT_RF_ERROR(decode_image(damaged(jpeg, jpeg.size() / 2), "half"), "half", "JPEG");
  EXPECT_RF_ERROR(decode_image(damaged(test::read_bytes(kImages + "jpeg_420.jpg"), 300), "cut"), "cut", "JPEG");
  EXPECT_RF_ERROR(decode_image(damaged(jpeg, 3), "soi"), "soi", "JPEG");
  const auto webp = test::read_bytes(kImages + "webp_lossless_alpha.webp");
  EXPECT_RF_ERROR(decode_image(damaged(webp, webp.size() / 2), "half"), "half", "WebP");
  EXPECT_RF_ERROR(decode_image(damaged(webp, 20, std::string(16, 'x')), "garbled"), "garbled", "WebP");
}

// A progressive JPEG whose first scan (DC, which decodes the same every time) is repeated 600
// times: libjpeg only warns about the bogus progression and would decode every copy, which for a
// large image takes minutes; the scan limit refuses it.
TEST(ImageFile, RefusesJpegScanBombs) {
  const auto jpeg = test::read_bytes(kImages + "jpeg_444_progressive.jpg");
  const std::array<std::uint8_t, 2> sos = {0xFF, 0xDA};
  const auto scan = std::search(jpeg.begin(), jpeg.end(), sos.begin(), sos.end());
  ASSERT_NE(scan, jpeg.end());
  // The scan's entropy-coded data ends at the next marker (0xFF not followed by 0 or a restart).
  auto end = scan + 2 + (scan[2] << 8 | scan[3]);
  while (end + 1 < jpeg.end() && !(end[0] == 0xFF && end[1] != 0 && (end[1] & 0xF8) != 0xD0)) ++end;
  std::vector<std::uint8_t> bomb(jpeg.begin(), end);
  for (int i = 0; i < 600; ++i) bomb.insert(bomb.end(), scan, end);
  bomb.insert(bomb.end(), end, jpeg.end());
  EXPECT_RF_ERROR(decode_image(bomb, "bomb"), "bomb", "JPEG", "more than 500 progressive scans");
  // The same with 100 copies decodes.
  bomb.erase(bomb.begin() + (end - jpeg.begin()) + 100 * (end - scan), bomb.end() - (jpeg.end() - end));
  EXPECT_EQ(decode_image(bomb, "100 scans").width, 19);
}

// Every fixture cut at every length, and with bytes flipped: each either decodes or throws
// rf::Error; any other outcome (a crash, another exception) fails the test.
TEST(ImageFile, DamagedFixturesNeverCrash) {
  std::mt19937 rng(7);
  std::size_t decoded = 0, refused = 0;
  const auto attempt = [&](const std::vector<std::uint8_t>& bytes) {
    try {
      decode_image(bytes, "damaged");
      ++decoded;
    } catch (const Error&) {
      ++refused;
    }
  };
  for (const auto& [name, entry] : expected()["images"].items()) {
    const auto bytes = test::read_bytes(kImages + entry["file"].get<std::string>());
    for (std::size_t size = 0; size < bytes.size(); ++size) attempt(damaged(bytes, size));
    for (int i = 0; i < 200; ++i) {
      auto flipped = bytes;
      flipped[rng() % flipped.size()] ^= static_cast<std::uint8_t>(1u << (rng() % 8));
      attempt(flipped);
    }
  }
  fmt::print("  damaged files: {} decoded, {} refused\n", decoded, refused);
  EXPECT_GT(refused, decoded);
}

TEST(ImageFile, EncoderRefusesWhatPngCannotHold) {
  const Image image = test_image(4, 4, 3, 6);
  for (const auto& key : std::vector<std::string>{"", std::string(80, 'k'), " lead", "trail ", "double  space", "\u732b", "tab\there"}) {
    EXPECT_RF_ERROR(encode_png(image, {{key, "text"}}, "out.png"), "out.png", "keyword");
  }
  EXPECT_RF_ERROR(encode_png(image, {{"parameters", "bad \xC3 utf-8"}}, "out.png"), "out.png", "UTF-8");
  EXPECT_RF_ERROR(encode_png(image, {{"parameters", std::string("nul\0inside", 10)}}, "out.png"), "out.png", "NUL");
  EXPECT_RF_ERROR(encode_png(test_image(4, 4, 2, 7), {}, "out.png"), "out.png", "2 channels");
  EXPECT_RF_ERROR(encode_png(Image{4, 4, 3, {1, 2, 3}}, {}, "out.png"), "out.png", "3 bytes of pixels");
  EXPECT_RF_ERROR(encode_png(Image{0, 4, 3, {}}, {}, "out.png"), "out.png", "no pixels");
  EXPECT_RF_ERROR(write_png("/nonexistent/dir/out.png", image), "/nonexistent/dir/out.png", "cannot write");
}

}  // namespace
}  // namespace rf
