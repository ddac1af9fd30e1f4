#pragma once
// The tensors of a file or folder as stored, and a part's parameters (parameters.h) taken from
// them: found under their names (or the names older and newer writers give them), checked against
// the shapes the config implies, and re-viewed, split or transposed where the layouts differ.
#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "formats/safetensors.h"
#include "formats/tensor.h"
#include "models/stable_diffusion/expected_tensors.h"

namespace rf::stable_diffusion {

// Fails for what rocmforge will not open as a safetensors file, telling the user what to do:
// pickles (.ckpt, .pt, .pth, .bin, or their bytes under another name) and GGUF files.
void check_safetensors_file(const std::string& path);

// One safetensors file, or the weights of a diffusers component folder, memory-mapped for as long
// as this lives. Tensors of dtypes rocmforge does not read are left out (formats/safetensors.h).
class StoredTensors {
 public:
  static std::unique_ptr<StoredTensors> file(const std::string& path);
  // diffusion_pytorch_model.* (diffusers) or model.* (transformers), single or sharded; the
  // full-precision file where its .fp16 variant sits beside it.
  static std::unique_ptr<StoredTensors> folder(const std::string& path);

  const std::string& source() const { return source_; }
  const TensorSet& tensors() const { return tensors_; }
  // The tensor `prefix` + `name`, or under a name other writers give it: transformers >= 5.6 saves
  // CLIPTextModel without "text_model.", diffusers < 0.14 named the VAE's mid-block attention
  // query/key/value/proj_attn.
  const TensorView* find(const std::string& prefix, const std::string& name) const;
  std::optional<std::string> skipped_dtype(const std::string& name) const;

  void mark_used(const std::string& name) { used_.insert(name); }
  std::size_t unused() const;  // tensors, read or skipped, that no part took

 private:
  StoredTensors(std::string source, std::vector<const SafetensorsFile*> files);

  std::string source_;
  std::unique_ptr<SafetensorsFile> file_;
  std::unique_ptr<SafetensorsSet> set_;
  std::vector<const SafetensorsFile*> files_;
  TensorSet tensors_;
  std::set<std::string> used_;
};

// Where a part's tensors are: below `prefix` in `stored`, in diffusers' or the original naming.
enum class Naming { diffusers, original };
struct PartSource {
  StoredTensors& stored;
  std::string prefix;
  Naming naming = Naming::diffusers;
};

// Tensors a conversion had to materialise (OpenCLIP's transposed text_projection); stable addresses.
using OwnedTensors = std::deque<std::vector<std::uint8_t>>;

// The part's tensors under their diffusers names, each checked against its shape; fails naming the
// source, the part (`part`: "UNet", "VAE", ...) and the tensor.
TensorSet collect_part(const std::vector<Parameter>& parameters, const PartSource& from, const std::string& part,
                       OwnedTensors& owned);

}  // namespace rf::stable_diffusion
