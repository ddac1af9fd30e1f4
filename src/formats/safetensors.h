#pragma once
// Hugging Face safetensors: one file (model.safetensors) or shards listed in
// model.safetensors.index.json. Files are memory-mapped; the JSON header is validated
// (dtype, shape, offsets inside the data section, no overlap) before any tensor is used.
// Spec: https://github.com/huggingface/safetensors#format
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "formats/dtype.h"
#include "util/mapped_file.h"

namespace rf {

// What a reader does with a tensor of a dtype rocmforge does not read (U8, BOOL, F8, ...): refuse the
// file, or leave the tensor out (its data_offsets still checked) and list it in skipped(). Stable
// Diffusion files may carry such tensors that no forward reads.
enum class OtherDTypes { refuse, skip };

// The file names of one checkpoint in a folder: the single file, or the index of its shards.
struct SafetensorsNames {
  std::string single = "model.safetensors";
  std::string index = "model.safetensors.index.json";
};

struct SafetensorsTensor {
  std::string name;
  DType dtype;                       // F32, F16, BF16, F64, I32 or I64; other dtypes are rejected naming the tensor
  std::vector<std::uint64_t> shape;  // row-major, as written by torch
  const void* data;                  // inside the map, range-checked
  std::uint64_t size_bytes;
};

class SafetensorsFile {
 public:
  // Throws rf::Error on malformed input.
  explicit SafetensorsFile(const std::string& path, OtherDTypes other = OtherDTypes::refuse);
  const std::string& path() const { return file_.path(); }
  const std::map<std::string, SafetensorsTensor>& tensors() const { return tensors_; }
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  const std::map<std::string, std::string>& skipped() const { return skipped_; }  // name -> stored dtype

 private:
  MappedFile file_;
  std::map<std::string, SafetensorsTensor> tensors_;
  std::map<std::string, std::string> metadata_;
  std::map<std::string, std::string> skipped_;
};

// All the tensors of a checkpoint folder, single file or sharded.
class SafetensorsSet {
 public:
  // Throws if neither layout is present; prefers the single file when both are.
  explicit SafetensorsSet(const std::string& folder, const SafetensorsNames& names = {},
                          OtherDTypes other = OtherDTypes::refuse);
  const std::string& folder() const { return folder_; }
  const std::vector<std::unique_ptr<SafetensorsFile>>& files() const { return files_; }
  const SafetensorsTensor* find(const std::string& name) const;
  const SafetensorsTensor& get(const std::string& name) const;  // throws naming the tensor and folder
  std::vector<std::string> names() const;

 private:
  std::string folder_;
  std::vector<std::unique_ptr<SafetensorsFile>> files_;
  std::map<std::string, const SafetensorsTensor*> index_;
};

// Writes a single safetensors file (tests and the converter use it).
void write_safetensors(const std::string& path, const std::vector<SafetensorsTensor>& tensors,
                       const std::map<std::string, std::string>& metadata = {});

}  // namespace rf
