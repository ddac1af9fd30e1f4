#pragma once
// GGUF v2/v3 reader. The file is memory-mapped; the header, metadata and tensor infos are
// parsed and validated against the file size up front, so later tensor reads cannot overrun.
// Spec: https://github.com/ggml-org/ggml/blob/master/docs/gguf.md
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "formats/dtype.h"
#include "util/mapped_file.h"

namespace rf {

enum class GgufType : std::uint32_t {
  U8 = 0, I8 = 1, U16 = 2, I16 = 3, U32 = 4, I32 = 5, F32 = 6, BOOL = 7,
  STRING = 8, ARRAY = 9, U64 = 10, I64 = 11, F64 = 12,
};

struct GgufValue;
struct GgufArray {
  GgufType element_type;
  std::vector<GgufValue> items;
};

// A metadata value. Integers of every width are widened (signed to int64, unsigned to uint64),
// floats to double, so lookups need not care about the stored width; `type` keeps the original.
struct GgufValue {
  GgufType type;
  std::variant<std::uint64_t, std::int64_t, double, bool, std::string, std::shared_ptr<GgufArray>> value;
};

struct GgufTensorInfo {
  std::string name;
  std::vector<std::uint64_t> dims;  // GGUF order: dims[0] is the innermost (contiguous) dimension
  DType dtype;
  std::uint64_t offset;             // from the start of the data section
  std::uint64_t size_bytes;
  const void* data;                 // inside the map, range-checked
};

class GgufFile {
 public:
  explicit GgufFile(const std::string& path);  // throws rf::Error on any malformed input

  const std::string& path() const { return file_.path(); }
  std::uint32_t version() const { return version_; }
  std::uint64_t alignment() const { return alignment_; }
  const std::map<std::string, GgufValue>& metadata() const { return metadata_; }
  const std::vector<GgufTensorInfo>& tensors() const { return tensors_; }

  const GgufValue* find(const std::string& key) const;
  const GgufTensorInfo* find_tensor(const std::string& name) const;
  const GgufTensorInfo& tensor(const std::string& name) const;  // throws naming the tensor

  // Typed lookups; the *_or variants return the fallback when the key is absent and throw
  // (naming the key) when it is present with an incompatible type.
  std::string get_string(const std::string& key) const;
  std::optional<std::string> get_string_opt(const std::string& key) const;
  std::uint64_t get_uint(const std::string& key) const;
  std::optional<std::uint64_t> get_uint_opt(const std::string& key) const;
  std::optional<double> get_float_opt(const std::string& key) const;
  std::optional<bool> get_bool_opt(const std::string& key) const;
  std::vector<std::string> get_string_array(const std::string& key) const;
  std::vector<double> get_float_array(const std::string& key) const;
  std::vector<std::int64_t> get_int_array(const std::string& key) const;

 private:
  MappedFile file_;
  std::uint32_t version_ = 0;
  std::uint64_t alignment_ = 32;
  std::map<std::string, GgufValue> metadata_;
  std::vector<GgufTensorInfo> tensors_;
  std::map<std::string, std::size_t> tensor_index_;
};

// Writes a GGUF v3 file (used by the converter and by tests that build bad files on purpose).
class GgufWriter {
 public:
  void set(const std::string& key, GgufValue value);
  // `data` must hold row_bytes(dtype, dims[0]) * (product of the other dims) bytes.
  void add_tensor(const std::string& name, std::vector<std::uint64_t> dims, DType dtype, std::vector<std::uint8_t> data);
  void write(const std::string& path, std::uint64_t alignment = 32) const;

 private:
  std::vector<std::pair<std::string, GgufValue>> metadata_;
  struct Tensor {
    std::string name;
    std::vector<std::uint64_t> dims;
    DType dtype;
    std::vector<std::uint8_t> data;
  };
  std::vector<Tensor> tensors_;
};

}  // namespace rf
