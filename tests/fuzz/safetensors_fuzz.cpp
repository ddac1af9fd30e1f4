// A .safetensors file: the header's JSON, dtypes, shapes and offsets, read both ways a caller may ask
// (refusing or skipping dtypes rocmforge does not run).
#include "formats/safetensors.h"
#include "fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace rf;
  const auto path = fuzz::write_file(fuzz::scratch() / "model.safetensors", fuzz::as_text(data, size));
  for (const auto other : {OtherDTypes::refuse, OtherDTypes::skip}) {
    fuzz::expect_only_rf_errors([&] {
      const SafetensorsFile file(path, other);
      // Touch each tensor's first and last byte: its range was checked to lie inside the file.
      volatile std::uint8_t sink = 0;
      for (const auto& [name, tensor] : file.tensors()) {
        const auto* bytes = static_cast<const std::uint8_t*>(tensor.data);
        if (tensor.size_bytes > 0) sink = sink + bytes[0] + bytes[tensor.size_bytes - 1];
      }
    });
  }
  return 0;
}
