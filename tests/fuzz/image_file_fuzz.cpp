// An image a client uploads (img2img's init image, inpainting's mask): PNG, JPEG or WebP bytes.
#include "formats/image_file.h"
#include "fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace rf;
  const std::span<const std::uint8_t> bytes(data, size);
  fuzz::expect_only_rf_errors([&] { decode_image(bytes, "upload"); });
  fuzz::expect_only_rf_errors([&] { decode_mask(bytes, "mask"); });
  fuzz::expect_only_rf_errors([&] { decode_alpha(bytes, "mask"); });
  return 0;
}
