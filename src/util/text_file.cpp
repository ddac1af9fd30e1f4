#include "util/text_file.h"

#include <cerrno>
#include <cstring>
#include <fstream>

#include "util/error.h"

namespace rf {

std::string read_text_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in) fail("{}: cannot open: {}", path, std::strerror(errno));
  // One read into a buffer of the file's size: a stream copy grows its buffer step by step.
  std::string contents(static_cast<std::size_t>(in.tellg()), '\0');
  in.seekg(0);
  if (!in.read(contents.data(), static_cast<std::streamsize>(contents.size()))) fail("{}: cannot read: {}", path, std::strerror(errno));
  return contents;
}

}  // namespace rf
