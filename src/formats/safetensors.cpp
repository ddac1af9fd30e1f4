#include "formats/safetensors.h"

#include <fmt/ranges.h>

#include <algorithm>
#include <array>
#include <bit>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <span>

#include "formats/detail.h"
#include "formats/json_file.h"
#include "util/error.h"

namespace rf {

namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr std::uint64_t kHeaderLengthBytes = 8;
constexpr std::uint64_t kMaxHeaderBytes = 100'000'000;  // the reference implementation's limit
constexpr std::uint64_t kHeaderPadding = 8;             // the reference pads the JSON with spaces to this
constexpr std::string_view kMetadataKey = "__metadata__";

struct DTypeName {
  DType dtype;
  std::string_view name;
};
constexpr DTypeName kDTypes[] = {
    {DType::F32, "F32"}, {DType::F16, "F16"}, {DType::BF16, "BF16"}, {DType::F64, "F64"}, {DType::I32, "I32"}, {DType::I64, "I64"}};

std::optional<DType> dtype_from_name(std::string_view name) {
  const auto it = std::ranges::find(kDTypes, name, &DTypeName::name);
  return it == std::end(kDTypes) ? std::nullopt : std::optional(it->dtype);
}

std::optional<std::string_view> dtype_to_name(DType dtype) {
  const auto it = std::ranges::find(kDTypes, dtype, &DTypeName::dtype);
  return it == std::end(kDTypes) ? std::nullopt : std::optional(it->name);
}

std::string supported_dtype_names() {
  std::vector<std::string_view> names;
  for (const auto& d : kDTypes) names.push_back(d.name);
  return fmt::format("{}", fmt::join(names, ", "));
}

// Bytes a tensor of this shape needs; errors start with `context`.
std::uint64_t shape_bytes(const std::string& context, const std::vector<std::uint64_t>& shape, DType dtype) {
  std::uint64_t bytes = dtype_info(dtype).block_bytes;  // the supported dtypes have one element per block
  for (const auto d : shape) {
    if (__builtin_mul_overflow(bytes, d, &bytes)) {
      fail("{} has shape [{}], whose size overflows", context, fmt::join(shape, ", "));
    }
  }
  return bytes;
}

// A JSON value for an error message. Only scalars are printed: dump() recurses, and a hostile
// header can nest deeply enough to overflow the stack.
std::string show(const json& v) { return v.is_primitive() ? v.dump() : fmt::format("a JSON {}", v.type_name()); }

json parse_json_bytes(const std::string& path, std::span<const std::uint8_t> text, std::string_view what) {
  return parse_json({reinterpret_cast<const char*>(text.data()), text.size()}, path, what);
}

std::map<std::string, std::string> read_metadata(const std::string& path, const json& entry) {
  if (!entry.is_object()) fail("{}: {} is not a JSON object", path, kMetadataKey);
  std::map<std::string, std::string> metadata;
  for (const auto& [key, value] : entry.items()) {
    if (!value.is_string()) fail("{}: {} key {} is {}, expected a string", path, kMetadataKey, key, show(value));
    metadata.emplace(key, value.get<std::string>());
  }
  return metadata;
}

// Reads the fields of one tensor entry, with error messages naming the file and the tensor.
class EntryReader {
 public:
  EntryReader(const std::string& path, const std::string& name, const json& entry)
      : path_(path), name_(name), entry_(entry) {
    if (!entry.is_object()) fail("{}: tensor {} has entry {}, expected a JSON object", path_, name_, show(entry));
  }

  std::string dtype_name() const {
    const auto& field = get("dtype");
    if (!field.is_string()) fail("{}: tensor {} has dtype {}, expected a string", path_, name_, show(field));
    return field.get<std::string>();
  }

  DType dtype() const {
    const auto name = dtype_name();
    if (const auto dtype = dtype_from_name(name)) return *dtype;
    fail("{}: tensor {} has dtype {}, which rocmforge does not support (supported: {})", path_, name_, name,
         supported_dtype_names());
  }

  std::vector<std::uint64_t> uints(const char* key) const {
    const auto& field = get(key);
    if (!field.is_array()) fail("{}: tensor {} has {} {}, expected a list", path_, name_, key, show(field));
    std::vector<std::uint64_t> values;
    for (const auto& v : field) {
      if (!v.is_number_unsigned()) {
        fail("{}: tensor {} has {} with an item {}, expected non-negative integers", path_, name_, key, show(v));
      }
      values.push_back(v.get<std::uint64_t>());
    }
    return values;
  }

 private:
  const json& get(const char* key) const {
    const auto it = entry_.find(key);
    if (it == entry_.end()) fail("{}: tensor {} has no {}", path_, name_, key);
    return *it;
  }

  const std::string& path_;
  const std::string& name_;
  const json& entry_;
};

// The tensor's byte range [begin, end) in the data section, checked to lie inside it.
std::pair<std::uint64_t, std::uint64_t> read_offsets(const EntryReader& reader, const std::string& path,
                                                     const std::string& name, std::span<const std::uint8_t> data) {
  const auto offsets = reader.uints("data_offsets");
  if (offsets.size() != 2) fail("{}: tensor {} has {} data_offsets, expected 2", path, name, offsets.size());
  const auto [begin, end] = std::pair(offsets[0], offsets[1]);
  if (begin > end) fail("{}: tensor {} has data_offsets [{}, {}], which end before they begin", path, name, begin, end);
  if (end > data.size()) {
    fail("{}: tensor {} has data_offsets [{}, {}] past the end of the data section ({} bytes): truncated or corrupt",
         path, name, begin, end, data.size());
  }
  return {begin, end};
}

SafetensorsTensor read_tensor(const EntryReader& reader, const std::string& path, const std::string& name,
                              std::span<const std::uint8_t> data) {
  SafetensorsTensor t{name, reader.dtype(), reader.uints("shape"), nullptr, 0};
  const auto [begin, end] = read_offsets(reader, path, name, data);
  t.size_bytes = end - begin;
  const auto expected = shape_bytes(fmt::format("{}: tensor {}", path, name), t.shape, t.dtype);
  if (expected != t.size_bytes) {
    fail("{}: tensor {} of shape [{}] and dtype {} needs {} bytes, but its data_offsets [{}, {}] hold {}", path, name,
         fmt::join(t.shape, ", "), *dtype_to_name(t.dtype), expected, begin, end, t.size_bytes);
  }
  t.data = data.data() + begin;
  return t;
}

std::uint64_t read_header_length(const MappedFile& file) {
  std::uint64_t length = 0;
  std::memcpy(&length, file.bytes(0, kHeaderLengthBytes, "header length").data(), sizeof length);
  if (length > kMaxHeaderBytes) {
    fail("{}: header length {} is over the {} byte limit: not a safetensors file, or corrupt", file.path(), length,
         kMaxHeaderBytes);
  }
  return length;
}

// Shard file name of each tensor, from the "weight_map" of model.safetensors.index.json.
std::map<std::string, std::string> read_weight_map(const std::string& index_path) {
  const MappedFile file(index_path);
  const auto index = parse_json_bytes(index_path, file.bytes(0, file.size(), "index"), "the index");
  const auto weight_map = index.find("weight_map");  // end() for a non-object too
  if (weight_map == index.end() || !weight_map->is_object()) fail("{}: has no \"weight_map\" object", index_path);
  std::map<std::string, std::string> shards;
  for (const auto& [tensor, shard] : weight_map->items()) {
    if (!shard.is_string()) fail("{}: tensor {} maps to {}, expected a file name", index_path, tensor, show(shard));
    shards.emplace(tensor, shard.get<std::string>());
  }
  return shards;
}

// Opens every shard the index lists, checking that each holds the tensors assigned to it.
std::vector<std::unique_ptr<SafetensorsFile>> open_shards(const std::string& folder, const std::string& index,
                                                          OtherDTypes other) {
  const fs::path dir(folder);
  std::vector<std::unique_ptr<SafetensorsFile>> files;
  std::map<std::string, const SafetensorsFile*> by_name;
  for (const auto& [tensor, shard] : read_weight_map((dir / index).string())) {
    auto it = by_name.find(shard);
    if (it == by_name.end()) {
      const auto shard_path = dir / shard;
      if (!fs::is_regular_file(shard_path)) fail("{}: shard {} listed in {} does not exist", folder, shard, index);
      files.push_back(std::make_unique<SafetensorsFile>(shard_path.string(), other));
      it = by_name.emplace(shard, files.back().get()).first;
    }
    if (!it->second->tensors().contains(tensor)) {
      fail("{}: {} puts tensor {} in {}, which does not contain it", folder, index, tensor, shard);
    }
  }
  return files;
}

std::vector<std::unique_ptr<SafetensorsFile>> open_files(const std::string& folder, const SafetensorsNames& names,
                                                         OtherDTypes other) {
  const fs::path dir(folder);
  // Like transformers, prefer the single file when both layouts are present.
  if (fs::exists(dir / names.single)) {
    std::vector<std::unique_ptr<SafetensorsFile>> files;
    files.push_back(std::make_unique<SafetensorsFile>((dir / names.single).string(), other));
    return files;
  }
  if (fs::exists(dir / names.index)) return open_shards(folder, names.index, other);
  fail("{}: has neither {} nor {}", folder, names.single, names.index);
}

}  // namespace

SafetensorsFile::SafetensorsFile(const std::string& path, OtherDTypes other) : file_(path) {
  const auto header_length = read_header_length(file_);
  const auto header = parse_json_bytes(path, file_.bytes(kHeaderLengthBytes, header_length, "JSON header"), "the header");
  if (!header.is_object()) fail("{}: the header is not a JSON object", path);
  const auto data_start = kHeaderLengthBytes + header_length;
  const auto data = file_.bytes(data_start, file_.size() - data_start, "data section");
  for (const auto& [name, entry] : header.items()) {
    if (name == kMetadataKey) {
      metadata_ = read_metadata(path, entry);
      continue;
    }
    const EntryReader reader(path, name, entry);
    if (other == OtherDTypes::skip && !dtype_from_name(reader.dtype_name())) {
      read_offsets(reader, path, name, data);
      skipped_.emplace(name, reader.dtype_name());
    } else {
      tensors_.emplace(name, read_tensor(reader, path, name, data));
    }
  }
  std::vector<const SafetensorsTensor*> all;
  for (const auto& [name, t] : tensors_) all.push_back(&t);
  detail::check_no_overlap(path, file_.data(), std::move(all));
}

SafetensorsSet::SafetensorsSet(const std::string& folder, const SafetensorsNames& names, OtherDTypes other)
    : folder_(folder), files_(open_files(folder, names, other)) {
  for (const auto& file : files_) {
    for (const auto& entry : file->tensors()) {
      const std::string& name = entry.first;  // a named variable: clang 15 cannot capture a structured binding
      if (index_.try_emplace(name, &entry.second).second) continue;
      const auto first = std::ranges::find_if(files_, [&](const auto& f) { return f->tensors().contains(name); });
      fail("{}: tensor {} is in both {} and {}", folder, name, (*first)->path(), file->path());
    }
  }
}

const SafetensorsTensor* SafetensorsSet::find(const std::string& name) const {
  const auto it = index_.find(name);
  return it == index_.end() ? nullptr : it->second;
}

const SafetensorsTensor& SafetensorsSet::get(const std::string& name) const {
  if (const auto* t = find(name)) return *t;
  fail("{}: tensor {} not found", folder_, name);
}

std::vector<std::string> SafetensorsSet::names() const {
  std::vector<std::string> names;
  names.reserve(index_.size());
  for (const auto& [name, tensor] : index_) names.push_back(name);
  return names;
}

void write_safetensors(const std::string& path, const std::vector<SafetensorsTensor>& tensors,
                       const std::map<std::string, std::string>& metadata) {
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  if (!metadata.empty()) header[kMetadataKey] = metadata;
  std::uint64_t offset = 0;
  for (const auto& t : tensors) {
    if (t.name == kMetadataKey || header.contains(t.name)) fail("{}: tensor name {} is taken", path, t.name);
    const auto dtype = dtype_to_name(t.dtype);
    if (!dtype) {
      fail("{}: tensor {} has dtype {}; safetensors files hold only {}", path, t.name, dtype_name(t.dtype),
           supported_dtype_names());
    }
    const auto bytes = shape_bytes(fmt::format("{}: tensor {}", path, t.name), t.shape, t.dtype);
    if (bytes != t.size_bytes) {
      fail("{}: tensor {} of shape [{}] needs {} bytes but has {}", path, t.name, fmt::join(t.shape, ", "), bytes,
           t.size_bytes);
    }
    header[t.name] = {{"dtype", *dtype}, {"shape", t.shape}, {"data_offsets", {offset, offset + bytes}}};
    offset += bytes;
  }
  auto text = header.dump();
  text.resize(detail::align_up(text.size(), kHeaderPadding), ' ');

  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  const auto length = std::bit_cast<std::array<char, kHeaderLengthBytes>>(static_cast<std::uint64_t>(text.size()));
  out.write(length.data(), length.size());
  out.write(text.data(), static_cast<std::streamsize>(text.size()));
  for (const auto& t : tensors) out.write(static_cast<const char*>(t.data), static_cast<std::streamsize>(t.size_bytes));
  out.close();
  if (!out) fail("{}: cannot write the safetensors file", path);
}

}  // namespace rf
