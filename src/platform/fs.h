// The file-system seam the planners read through.
//
// A planner never opens a file itself: it asks a FileSystem, so a test can
// feed rank tables from memory (MemoryFileSystem) and the planner stays a pure
// function of its inputs. Only reads and stat-like questions are offered;
// nothing here creates, writes or removes anything.
#pragma once

#include <cstddef>
#include <map>
#include <string>
#include <string_view>

#include "base/result.h"

namespace trainit {

enum class PathKind { kMissing, kDirectory, kOther };

class FileSystem {
 public:
  virtual ~FileSystem() = default;

  // The whole content of the regular file at `path`, which must be at most
  // `max_bytes` long. Errors carry an errno: ENOENT when nothing is there,
  // EFBIG when it is larger than `max_bytes`, EISDIR/EINVAL when it is not a
  // regular file, and whatever open/read reported otherwise. The message
  // names the path.
  [[nodiscard]] virtual Result<std::string> read_file(const std::string& path, std::size_t max_bytes) const = 0;

  // What `path` names now (symbolic links followed). Errors other than "not
  // there" read as kOther: the caller then treats the path as a file, and the
  // read that follows reports the real error.
  [[nodiscard]] virtual PathKind kind(const std::string& path) const = 0;
};

// The real file system, through open/fstat/read. Never blocks on a FIFO
// (opened O_NONBLOCK and refused as not regular) and never follows the file
// past `max_bytes` even when it grows while being read.
class RealFileSystem final : public FileSystem {
 public:
  [[nodiscard]] Result<std::string> read_file(const std::string& path, std::size_t max_bytes) const override;
  [[nodiscard]] PathKind kind(const std::string& path) const override;
};

// An in-memory file system for tests: files by absolute path; a directory
// exists when added or when some file lies below it.
class MemoryFileSystem final : public FileSystem {
 public:
  void add_file(std::string path, std::string content);
  void add_dir(std::string path);

  [[nodiscard]] Result<std::string> read_file(const std::string& path, std::size_t max_bytes) const override;
  [[nodiscard]] PathKind kind(const std::string& path) const override;

 private:
  std::map<std::string, std::string, std::less<>> files_;
  std::map<std::string, bool, std::less<>> dirs_;
};

}  // namespace trainit
