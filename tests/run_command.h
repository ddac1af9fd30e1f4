#pragma once
// Runs a shell command for a test and collects what it prints (stdout and stderr, if the command
// sends stderr there with 2>&1) and how it exited.
#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <string>

namespace rf::test {

struct CommandRun {
  int exit_code;  // 128 + the signal for a command a signal ended
  std::string output;
};

inline CommandRun run_command(const std::string& command) {
  FILE* pipe = popen(command.c_str(), "r");
  std::string output;
  std::array<char, 4096> buffer{};
  while (std::size_t n = fread(buffer.data(), 1, buffer.size(), pipe)) output.append(buffer.data(), n);
  const int status = pclose(pipe);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status), output};
}

}  // namespace rf::test
