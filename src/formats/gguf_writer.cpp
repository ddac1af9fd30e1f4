#include <fmt/ranges.h>

#include <algorithm>
#include <bit>
#include <cstring>
#include <fstream>
#include <iterator>
#include <limits>
#include <utility>

#include "formats/detail.h"
#include "formats/gguf.h"
#include "util/error.h"

namespace rf {

namespace {

constexpr std::uint32_t kWrittenVersion = 3;

using Metadata = std::vector<std::pair<std::string, GgufValue>>;

// Replaces the value of an existing key in place, so keys keep their first insertion position.
void upsert(Metadata& metadata, const std::string& key, GgufValue value) {
  const auto it = std::ranges::find(metadata, key, &Metadata::value_type::first);
  if (it != metadata.end()) {
    it->second = std::move(value);
  } else {
    metadata.emplace_back(key, std::move(value));
  }
}

// Appends little-endian GGUF encodings to a byte buffer; errors start with the path being written.
class Encoder {
 public:
  Encoder(std::vector<std::uint8_t>& out, const std::string& path) : out_(out), path_(path) {}

  template <typename T>
  void put(T value) {
    put_raw({reinterpret_cast<const char*>(&value), sizeof value});
  }

  // resize + memcpy rather than insert, which trips GCC 12's -Wstringop-overflow false positive.
  void put_raw(std::string_view bytes) {
    const auto at = out_.size();
    out_.resize(at + bytes.size());
    std::memcpy(out_.data() + at, bytes.data(), bytes.size());
  }

  void put_string(std::string_view s) {
    put<std::uint64_t>(s.size());
    put_raw(s);
  }

  // The value's payload, without its type tag (arrays carry one per array, not per item).
  void put_value(const std::string& key, const GgufValue& v) {
    switch (v.type) {
      case GgufType::U8: return put(narrow<std::uint8_t>(key, v));
      case GgufType::I8: return put(narrow<std::int8_t>(key, v));
      case GgufType::U16: return put(narrow<std::uint16_t>(key, v));
      case GgufType::I16: return put(narrow<std::int16_t>(key, v));
      case GgufType::U32: return put(narrow<std::uint32_t>(key, v));
      case GgufType::I32: return put(narrow<std::int32_t>(key, v));
      case GgufType::U64: return put(narrow<std::uint64_t>(key, v));
      case GgufType::I64: return put(narrow<std::int64_t>(key, v));
      case GgufType::F32: return put(static_cast<float>(held<double>(key, v)));
      case GgufType::F64: return put(held<double>(key, v));
      case GgufType::BOOL: return put<std::uint8_t>(held<bool>(key, v));
      case GgufType::STRING: return put_string(held<std::string>(key, v));
      case GgufType::ARRAY: return put_array(key, held<std::shared_ptr<GgufArray>>(key, v));
    }
    fail("{}: metadata key {} has unknown value type {}", path_, key, static_cast<std::uint32_t>(v.type));
  }

 private:
  void put_array(const std::string& key, const std::shared_ptr<GgufArray>& array) {
    if (!array) fail("{}: metadata key {} holds a null array", path_, key);
    put(static_cast<std::uint32_t>(array->element_type));
    put<std::uint64_t>(array->items.size());
    for (const auto& item : array->items) {
      if (item.type != array->element_type) {
        fail("{}: metadata key {} is an array of {} with an item of type {}", path_, key,
             detail::gguf_type_name(array->element_type), detail::gguf_type_name(item.type));
      }
      put_value(key, item);
    }
  }

  // The variant alternative that `v.type` calls for.
  template <typename T>
  const T& held(const std::string& key, const GgufValue& v) const {
    if (const auto* value = std::get_if<T>(&v.value)) return *value;
    fail("{}: metadata key {} has type {} but holds another kind of value", path_, key, detail::gguf_type_name(v.type));
  }

  // An integer value checked to fit the stored width; either signedness is accepted.
  template <typename T>
  T narrow(const std::string& key, const GgufValue& v) const {
    if (const auto* u = std::get_if<std::uint64_t>(&v.value)) return checked_cast<T>(key, v.type, *u);
    return checked_cast<T>(key, v.type, held<std::int64_t>(key, v));
  }

  template <typename T, typename Wide>
  T checked_cast(const std::string& key, GgufType type, Wide value) const {
    if (!std::in_range<T>(value)) {
      fail("{}: metadata key {} holds {}, which does not fit in {}", path_, key, value, detail::gguf_type_name(type));
    }
    return static_cast<T>(value);
  }

  std::vector<std::uint8_t>& out_;
  const std::string& path_;
};

}  // namespace

void GgufWriter::set(const std::string& key, GgufValue value) { upsert(metadata_, key, std::move(value)); }

void GgufWriter::add_tensor(const std::string& name, std::vector<std::uint64_t> dims, DType dtype,
                            std::vector<std::uint8_t> data) {
  if (std::ranges::find(tensors_, name, &Tensor::name) != tensors_.end()) {
    fail("GgufWriter: tensor {} added twice", name);
  }
  const auto expected = detail::gguf_tensor_bytes(fmt::format("GgufWriter: tensor {}", name), dims, dtype);
  if (data.size() != expected) {
    fail("GgufWriter: tensor {} has {} bytes of data, expected {} for {} [{}]", name, data.size(), expected,
         dtype_name(dtype), fmt::join(dims, ", "));
  }
  tensors_.push_back({name, std::move(dims), dtype, std::move(data)});
}

void GgufWriter::write(const std::string& path, std::uint64_t alignment) const {
  if (!std::has_single_bit(alignment) || alignment > std::numeric_limits<std::uint32_t>::max()) {
    fail("{}: GGUF alignment {} is not a power of two that fits in 32 bits", path, alignment);
  }
  // Readers learn the alignment only from the metadata, so it must agree with the padding we write.
  auto metadata = metadata_;
  const std::string alignment_key(detail::kGgufAlignmentKey);
  if (alignment != detail::kGgufDefaultAlignment ||
      std::ranges::count(metadata, alignment_key, &Metadata::value_type::first)) {
    upsert(metadata, alignment_key, {GgufType::U32, alignment});
  }

  std::vector<std::uint8_t> header;
  Encoder enc(header, path);
  enc.put_raw(detail::kGgufMagic);
  enc.put(kWrittenVersion);
  enc.put<std::uint64_t>(tensors_.size());
  enc.put<std::uint64_t>(metadata.size());
  for (const auto& [key, value] : metadata) {
    enc.put_string(key);
    enc.put(static_cast<std::uint32_t>(value.type));
    enc.put_value(key, value);
  }
  std::uint64_t offset = 0;
  for (const auto& t : tensors_) {
    enc.put_string(t.name);
    enc.put<std::uint32_t>(t.dims.size());
    for (const auto d : t.dims) enc.put(d);
    enc.put(dtype_to_ggml(t.dtype));
    enc.put(offset);
    offset = detail::align_up(offset + t.data.size(), alignment);
  }
  header.resize(detail::align_up(header.size(), alignment));

  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(header.data()), static_cast<std::streamsize>(header.size()));
  for (const auto& t : tensors_) {
    out.write(reinterpret_cast<const char*>(t.data.data()), static_cast<std::streamsize>(t.data.size()));
    std::fill_n(std::ostreambuf_iterator<char>(out), detail::align_up(t.data.size(), alignment) - t.data.size(), '\0');
  }
  out.close();
  if (!out) fail("{}: cannot write the GGUF file", path);
}

}  // namespace rf
