#pragma once
// Reading a whole file that the user named (a prompt, a grammar, a vocabulary).
#include <string>

namespace rf {

// The bytes of the file; throws rf::Error naming the file and why it could not be read.
std::string read_text_file(const std::string& path);

}  // namespace rf
