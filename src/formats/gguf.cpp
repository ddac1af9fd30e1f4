#include "formats/gguf.h"

#include <fmt/ranges.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <limits>
#include <utility>

#include "formats/detail.h"
#include "util/error.h"

namespace rf {

namespace {

using detail::gguf_type_name;

// No real model comes near these; they bound what a corrupt header can make us allocate.
constexpr std::uint64_t kMaxCount = std::uint64_t{1} << 24;
constexpr int kMaxArrayDepth = 8;
// Smallest encodings, which bound how many of each can fit in the rest of the file.
constexpr std::uint64_t kMinKvBytes = 8 + 4 + 1;                  // empty key, value type, one-byte value
constexpr std::uint64_t kMinTensorInfoBytes = 8 + 4 + 8 + 4 + 8;  // empty name, n_dims, one dim, type, offset

// Sequential reads over the map; every read is range-checked by MappedFile::bytes.
class Cursor {
 public:
  explicit Cursor(const MappedFile& file) : file_(file) {}

  const std::string& path() const { return file_.path(); }
  std::uint64_t pos() const { return pos_; }

  template <typename T>
  T read(const char* what) {
    T value;
    std::memcpy(&value, take(sizeof value, what).data(), sizeof value);
    return value;
  }

  std::string read_string(const char* what) {
    const auto length = read<std::uint64_t>(what);
    const auto bytes = take(length, what);
    return {bytes.begin(), bytes.end()};
  }

  // A count of items that take at least `min_item_bytes` each: checked against the rest of the
  // file before anyone reserves memory for it.
  std::uint64_t read_count(const char* what, std::uint64_t min_item_bytes) {
    const auto count = read<std::uint64_t>(what);
    const auto limit = std::min((file_.size() - pos_) / min_item_bytes, kMaxCount);
    if (count > limit) {
      fail("{}: {} {} at offset {} is corrupt: at most {} can follow in this file", path(), what, count,
           pos_ - sizeof count, limit);
    }
    return count;
  }

 private:
  std::span<const std::uint8_t> take(std::uint64_t length, const char* what) {
    const auto bytes = file_.bytes(pos_, length, what);
    pos_ += length;
    return bytes;
  }

  const MappedFile& file_;
  std::uint64_t pos_ = 0;
};

std::uint32_t read_version(Cursor& in) {
  const auto magic = in.read<std::array<char, 4>>("magic");
  if (std::string_view(magic.data(), magic.size()) != detail::kGgufMagic) {
    fail("{}: not a GGUF file (the magic is {:?}, expected \"GGUF\")", in.path(), std::string_view(magic.data(), 4));
  }
  const auto version = in.read<std::uint32_t>("version");
  if (version == 2 || version == 3) return version;
  if (version == 1) fail("{}: GGUF version 1 is not supported (only 2 and 3); convert the model again", in.path());
  if (const auto swapped = __builtin_bswap32(version); swapped == 2 || swapped == 3) {
    fail("{}: big-endian GGUF files are not supported", in.path());
  }
  fail("{}: unsupported GGUF version {} (only 2 and 3)", in.path(), version);
}

std::uint64_t min_encoded_size(GgufType type) {
  switch (type) {
    case GgufType::U8:
    case GgufType::I8:
    case GgufType::BOOL: return 1;
    case GgufType::U16:
    case GgufType::I16: return 2;
    case GgufType::U32:
    case GgufType::I32:
    case GgufType::F32: return 4;
    case GgufType::U64:
    case GgufType::I64:
    case GgufType::F64: return 8;
    case GgufType::STRING: return sizeof(std::uint64_t);
    case GgufType::ARRAY: return sizeof(std::uint32_t) + sizeof(std::uint64_t);
  }
  return 1;
}

GgufType read_type(Cursor& in, const std::string& key) {
  const auto raw = in.read<std::uint32_t>("metadata value type");
  if (raw > static_cast<std::uint32_t>(GgufType::F64)) {
    fail("{}: metadata key {} has unknown value type {}", in.path(), key, raw);
  }
  return static_cast<GgufType>(raw);
}

GgufValue read_value(Cursor& in, GgufType type, const std::string& key, int depth);

std::shared_ptr<GgufArray> read_array(Cursor& in, const std::string& key, int depth) {
  if (depth > kMaxArrayDepth) {
    fail("{}: metadata key {} nests arrays more than {} deep", in.path(), key, kMaxArrayDepth);
  }
  auto array = std::make_shared<GgufArray>();
  array->element_type = read_type(in, key);
  const auto count = in.read_count("array length", min_encoded_size(array->element_type));
  array->items.reserve(count);
  for (std::uint64_t i = 0; i < count; ++i) array->items.push_back(read_value(in, array->element_type, key, depth));
  return array;
}

// Widens a stored scalar of type Raw to the variant alternative Wide.
template <typename Raw, typename Wide>
GgufValue read_scalar(Cursor& in, GgufType type) {
  return {type, static_cast<Wide>(in.read<Raw>("metadata value"))};
}

GgufValue read_value(Cursor& in, GgufType type, const std::string& key, int depth) {
  switch (type) {
    case GgufType::U8: return read_scalar<std::uint8_t, std::uint64_t>(in, type);
    case GgufType::I8: return read_scalar<std::int8_t, std::int64_t>(in, type);
    case GgufType::U16: return read_scalar<std::uint16_t, std::uint64_t>(in, type);
    case GgufType::I16: return read_scalar<std::int16_t, std::int64_t>(in, type);
    case GgufType::U32: return read_scalar<std::uint32_t, std::uint64_t>(in, type);
    case GgufType::I32: return read_scalar<std::int32_t, std::int64_t>(in, type);
    case GgufType::U64: return read_scalar<std::uint64_t, std::uint64_t>(in, type);
    case GgufType::I64: return read_scalar<std::int64_t, std::int64_t>(in, type);
    case GgufType::F32: return read_scalar<float, double>(in, type);
    case GgufType::F64: return read_scalar<double, double>(in, type);
    case GgufType::BOOL: {
      const auto byte = in.read<std::uint8_t>("metadata value");
      if (byte > 1) fail("{}: metadata key {} has bool value {}, expected 0 or 1", in.path(), key, byte);
      return {type, byte == 1};
    }
    case GgufType::STRING: return {type, in.read_string("metadata string")};
    case GgufType::ARRAY: return {type, read_array(in, key, depth + 1)};
  }
  fail("{}: metadata key {} has unknown value type", in.path(), key);  // read_type let no other value through
}

std::map<std::string, GgufValue> read_metadata(Cursor& in, std::uint64_t count) {
  std::map<std::string, GgufValue> metadata;
  for (std::uint64_t i = 0; i < count; ++i) {
    auto key = in.read_string("metadata key");
    const auto type = read_type(in, key);
    auto value = read_value(in, type, key, 0);
    if (!metadata.try_emplace(key, std::move(value)).second) fail("{}: metadata key {} appears twice", in.path(), key);
  }
  return metadata;
}

DType read_dtype(Cursor& in, const std::string& tensor) {
  const auto ggml_type = in.read<std::uint32_t>("tensor type");
  if (const auto dtype = dtype_from_ggml(ggml_type)) return *dtype;
  const auto name = ggml_type_name(ggml_type);
  fail("{}: tensor {} has type {}, which rocmforge does not support (supported: {})", in.path(), tensor,
       name == "unknown" ? fmt::format("{} (unknown)", ggml_type) : std::string(name), weight_dtype_names());
}

GgufTensorInfo read_tensor_info(Cursor& in) {
  GgufTensorInfo info{};
  info.name = in.read_string("tensor name");
  const auto n_dims = in.read<std::uint32_t>("tensor dimension count");
  if (n_dims == 0 || n_dims > detail::kGgufMaxDims) {
    fail("{}: tensor {} has {} dimensions; GGUF allows 1 to {}", in.path(), info.name, n_dims, detail::kGgufMaxDims);
  }
  for (std::uint32_t i = 0; i < n_dims; ++i) info.dims.push_back(in.read<std::uint64_t>("tensor dimension"));
  info.dtype = read_dtype(in, info.name);
  info.offset = in.read<std::uint64_t>("tensor data offset");
  info.size_bytes =
      detail::gguf_tensor_bytes(fmt::format("{}: tensor {}", in.path(), info.name), info.dims, info.dtype);
  return info;
}

std::uint64_t checked_alignment(const GgufFile& gguf) {
  const std::string key(detail::kGgufAlignmentKey);
  const auto alignment = gguf.get_uint_opt(key).value_or(detail::kGgufDefaultAlignment);
  if (!std::has_single_bit(alignment) || alignment > std::numeric_limits<std::uint32_t>::max()) {
    fail("{}: {} is {}, which is not a power of two that fits in 32 bits", gguf.path(), key, alignment);
  }
  return alignment;
}

// Points every tensor into the data section after checking alignment, bounds and overlap.
void place_tensor_data(const MappedFile& file, std::uint64_t data_start, std::uint64_t alignment,
                       std::vector<GgufTensorInfo>& tensors) {
  if (tensors.empty()) return;  // a file without tensors may end before the padding
  if (data_start > file.size()) {
    fail("{}: the data section would start at offset {}, past the end of the file ({} bytes): the file is truncated",
         file.path(), data_start, file.size());
  }
  const auto data = file.bytes(data_start, file.size() - data_start, "data section");
  std::vector<const GgufTensorInfo*> placed;
  for (auto& t : tensors) {
    if (t.offset % alignment != 0) {
      fail("{}: tensor {} has data offset {}, which is not a multiple of the alignment {}", file.path(), t.name,
           t.offset, alignment);
    }
    if (t.offset > data.size() || t.size_bytes > data.size() - t.offset) {
      fail(
          "{}: tensor {} needs {} bytes at data offset {}, but the data section has only {}: the file is truncated or "
          "corrupt",
          file.path(), t.name, t.size_bytes, t.offset, data.size());
    }
    t.data = data.data() + t.offset;
    placed.push_back(&t);
  }
  detail::check_no_overlap(file.path(), file.data(), std::move(placed));
}

// How a value looks in an error message: its type, and the value itself for numbers.
std::string describe(const GgufValue& v) {
  const auto type = gguf_type_name(v.type);
  if (const auto* a = std::get_if<std::shared_ptr<GgufArray>>(&v.value)) {
    return fmt::format("an array of {}", gguf_type_name((*a)->element_type));
  }
  if (const auto* u = std::get_if<std::uint64_t>(&v.value)) return fmt::format("{} {}", type, *u);
  if (const auto* i = std::get_if<std::int64_t>(&v.value)) return fmt::format("{} {}", type, *i);
  if (const auto* d = std::get_if<double>(&v.value)) return fmt::format("{} {}", type, *d);
  return fmt::format("a {}", type);
}

// Conversions from stored values to what the getters return; nullopt means incompatible.
std::optional<std::string> as_string(const GgufValue& v) {
  if (const auto* s = std::get_if<std::string>(&v.value)) return *s;
  return std::nullopt;
}
std::optional<bool> as_bool(const GgufValue& v) {
  if (const auto* b = std::get_if<bool>(&v.value)) return *b;
  return std::nullopt;
}
std::optional<std::uint64_t> as_uint(const GgufValue& v) {
  if (const auto* u = std::get_if<std::uint64_t>(&v.value)) return *u;
  if (const auto* i = std::get_if<std::int64_t>(&v.value); i && *i >= 0) return static_cast<std::uint64_t>(*i);
  return std::nullopt;
}
std::optional<std::int64_t> as_int(const GgufValue& v) {
  if (const auto* i = std::get_if<std::int64_t>(&v.value)) return *i;
  if (const auto* u = std::get_if<std::uint64_t>(&v.value); u && std::in_range<std::int64_t>(*u)) {
    return static_cast<std::int64_t>(*u);
  }
  return std::nullopt;
}
std::optional<double> as_double(const GgufValue& v) {
  if (const auto* d = std::get_if<double>(&v.value)) return *d;
  if (const auto* u = std::get_if<std::uint64_t>(&v.value)) return static_cast<double>(*u);
  if (const auto* i = std::get_if<std::int64_t>(&v.value)) return static_cast<double>(*i);
  return std::nullopt;
}
std::optional<std::shared_ptr<GgufArray>> as_array(const GgufValue& v) {
  if (const auto* a = std::get_if<std::shared_ptr<GgufArray>>(&v.value)) return *a;
  return std::nullopt;
}

// Whether the getter behind `convert` can take values of `type`, judged on a zero of that type,
// so that even an empty array is checked.
template <typename Convert>
bool accepts(GgufType type, Convert convert) {
  const auto accepts_zero = [&](auto zero) { return convert({type, zero}).has_value(); };
  switch (type) {
    case GgufType::U8:
    case GgufType::U16:
    case GgufType::U32:
    case GgufType::U64: return accepts_zero(std::uint64_t{0});
    case GgufType::I8:
    case GgufType::I16:
    case GgufType::I32:
    case GgufType::I64: return accepts_zero(std::int64_t{0});
    case GgufType::F32:
    case GgufType::F64: return accepts_zero(0.0);
    case GgufType::BOOL: return accepts_zero(false);
    case GgufType::STRING: return accepts_zero(std::string());
    case GgufType::ARRAY: return accepts_zero(std::shared_ptr<GgufArray>());
  }
  return false;
}

template <typename Convert>
auto lookup(const GgufFile& gguf, const std::string& key, std::string_view expected, Convert convert)
    -> decltype(convert(std::declval<GgufValue>())) {
  const GgufValue* value = gguf.find(key);
  if (!value) return std::nullopt;
  auto converted = convert(*value);
  if (!converted) fail("{}: metadata key {} is {}, expected {}", gguf.path(), key, describe(*value), expected);
  return converted;
}

template <typename T>
T require(const GgufFile& gguf, const std::string& key, std::optional<T> value) {
  if (!value) fail("{}: metadata key {} is missing", gguf.path(), key);
  return *std::move(value);
}

template <typename Convert>
auto lookup_array(const GgufFile& gguf, const std::string& key, std::string_view expected, Convert convert) {
  using T = typename decltype(convert(std::declval<GgufValue>()))::value_type;
  const auto array = require(gguf, key, lookup(gguf, key, fmt::format("an array of {}", expected), as_array));
  if (!accepts(array->element_type, convert)) {
    fail("{}: metadata key {} is an array of {}, expected an array of {}", gguf.path(), key,
         gguf_type_name(array->element_type), expected);
  }
  std::vector<T> out;
  out.reserve(array->items.size());
  for (std::size_t i = 0; i < array->items.size(); ++i) {
    auto converted = convert(array->items[i]);
    if (!converted) {
      fail("{}: metadata key {} item {} is {}, which is out of range for an array of {}", gguf.path(), key, i,
           describe(array->items[i]), expected);
    }
    out.push_back(*std::move(converted));
  }
  return out;
}

}  // namespace

namespace detail {

std::string_view gguf_type_name(GgufType type) {
  switch (type) {
    case GgufType::U8: return "u8";
    case GgufType::I8: return "i8";
    case GgufType::U16: return "u16";
    case GgufType::I16: return "i16";
    case GgufType::U32: return "u32";
    case GgufType::I32: return "i32";
    case GgufType::F32: return "f32";
    case GgufType::BOOL: return "bool";
    case GgufType::STRING: return "string";
    case GgufType::ARRAY: return "array";
    case GgufType::U64: return "u64";
    case GgufType::I64: return "i64";
    case GgufType::F64: return "f64";
  }
  return "unknown";
}

std::uint64_t gguf_tensor_bytes(const std::string& context, const std::vector<std::uint64_t>& dims, DType dtype) {
  if (dims.empty() || dims.size() > kGgufMaxDims) {
    fail("{} has {} dimensions; GGUF allows 1 to {}", context, dims.size(), kGgufMaxDims);
  }
  std::uint64_t elements = 1;
  for (const auto d : dims) {
    if (d == 0) fail("{} has a zero dimension in [{}]", context, fmt::join(dims, ", "));
    if (__builtin_mul_overflow(elements, d, &elements)) {
      fail("{} has dimensions [{}] whose product overflows", context, fmt::join(dims, ", "));
    }
  }
  const auto info = dtype_info(dtype);
  if (dims[0] % info.block_elems != 0) {
    fail("{} has an innermost dimension of {}, which is not a multiple of the {} block size {}", context, dims[0],
         info.name, info.block_elems);
  }
  std::uint64_t bytes = 0;
  if (__builtin_mul_overflow(elements / info.block_elems, info.block_bytes, &bytes)) {
    fail("{} has dimensions [{}] whose size in bytes overflows", context, fmt::join(dims, ", "));
  }
  return bytes;
}

}  // namespace detail

GgufFile::GgufFile(const std::string& path) : file_(path) {
  Cursor in(file_);
  version_ = read_version(in);
  const auto tensor_count = in.read_count("tensor count", kMinTensorInfoBytes);
  const auto kv_count = in.read_count("metadata key/value count", kMinKvBytes);
  metadata_ = read_metadata(in, kv_count);
  alignment_ = checked_alignment(*this);
  tensors_.reserve(tensor_count);
  for (std::uint64_t i = 0; i < tensor_count; ++i) {
    tensors_.push_back(read_tensor_info(in));
    if (!tensor_index_.try_emplace(tensors_.back().name, i).second) {
      fail("{}: tensor {} appears twice", path, tensors_.back().name);
    }
  }
  place_tensor_data(file_, detail::align_up(in.pos(), alignment_), alignment_, tensors_);
}

const GgufValue* GgufFile::find(const std::string& key) const {
  const auto it = metadata_.find(key);
  return it == metadata_.end() ? nullptr : &it->second;
}

const GgufTensorInfo* GgufFile::find_tensor(const std::string& name) const {
  const auto it = tensor_index_.find(name);
  return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

const GgufTensorInfo& GgufFile::tensor(const std::string& name) const {
  if (const auto* t = find_tensor(name)) return *t;
  fail("{}: tensor {} not found", path(), name);
}

std::string GgufFile::get_string(const std::string& key) const { return require(*this, key, get_string_opt(key)); }
std::optional<std::string> GgufFile::get_string_opt(const std::string& key) const {
  return lookup(*this, key, "a string", as_string);
}
std::uint64_t GgufFile::get_uint(const std::string& key) const { return require(*this, key, get_uint_opt(key)); }
std::optional<std::uint64_t> GgufFile::get_uint_opt(const std::string& key) const {
  return lookup(*this, key, "a non-negative integer", as_uint);
}
std::optional<double> GgufFile::get_float_opt(const std::string& key) const {
  return lookup(*this, key, "a number", as_double);
}
std::optional<bool> GgufFile::get_bool_opt(const std::string& key) const {
  return lookup(*this, key, "a bool", as_bool);
}
std::vector<std::string> GgufFile::get_string_array(const std::string& key) const {
  return lookup_array(*this, key, "strings", as_string);
}
std::vector<double> GgufFile::get_float_array(const std::string& key) const {
  return lookup_array(*this, key, "numbers", as_double);
}
std::vector<std::int64_t> GgufFile::get_int_array(const std::string& key) const {
  return lookup_array(*this, key, "integers", as_int);
}

}  // namespace rf
