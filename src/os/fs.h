// The file-system seam the planners read through.
//
// A planner never opens a file itself: it asks a FileSystem, so a test can
// feed rank tables from memory (MemoryFileSystem) and the planner stays a pure
// function of its inputs. Only reads and stat-like questions are offered;
// nothing here creates, writes or removes anything.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>

#include "base/fd.h"
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

// What changes whenever a file's content does: which file it is (device and
// inode), its size, and its modification and change times.
struct FileStamp {
  std::uint64_t device = 0;
  std::uint64_t inode = 0;
  std::int64_t size = 0;
  std::int64_t mtime_ns = 0;
  std::int64_t ctime_ns = 0;

  friend bool operator==(const FileStamp&, const FileStamp&) = default;
};

// A file waited for (the rank table), looked at on every event: changed()
// opens and stats it, and says whether it can differ from what the last look
// found; file_system() then reads it through the descriptor that look
// opened, so that what is read is the file that was stamped (a rename over it
// in between changes the stamp of the next look, not what this one reads).
//
// Equal stamps are trusted only once the file has been left alone for
// `settle`: a write within the file system's timestamp granularity (a jiffy,
// or a second or two on some file systems) after a look could leave size and
// times as they were. A look closer than that to the file's last change
// (ctime) is taken again at the next call.
class FileWatch {
 public:
  static constexpr std::chrono::seconds kSettle{3};

  explicit FileWatch(std::string path, std::chrono::nanoseconds settle = kSettle);
  ~FileWatch();
  FileWatch(const FileWatch&) = delete;
  FileWatch& operator=(const FileWatch&) = delete;

  // Looks at the file now (`now`: the wall clock, that of file times). False
  // when it is the file the last look that returned true found, with the same
  // stamp, and that look could trust it (or when it was missing then and is
  // still); true otherwise, after which file_system() reads this look's file.
  bool changed(std::chrono::system_clock::time_point now);

  // The real file system, except that the watched path is the file as the
  // last changed() found it: read through its descriptor (missing, or the
  // error opening it, as it was then).
  [[nodiscard]] const FileSystem& file_system() const;

  // Closes the last look's descriptor (file_system() then reads the path
  // afresh).
  void release();

  [[nodiscard]] const std::string& path() const { return path_; }

 private:
  class Pinned;
  enum class Found { kNothing, kFile, kMissing, kError };

  std::string path_;
  std::chrono::nanoseconds settle_;
  Found found_ = Found::kNothing;  // by the last look that returned true
  int error_ = 0;                  // kError: the errno of opening or stating it
  FileStamp stamp_;                // kFile
  bool regular_ = false;           // kFile: a regular file
  bool directory_ = false;         // kFile: a directory
  bool trusted_ = false;           // that look may be taken for the next one
  bool pinned_ = false;            // file_system() reads that look's file (until release())
  Fd fd_;                          // kFile: the descriptor it opened
  std::unique_ptr<Pinned> view_;
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
