#include "os/fs.h"

#include <fcntl.h>
#include <fmt/core.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>

#include "base/fd.h"
#include "base/log.h"
#include "os/text.h"

namespace trainit {
namespace {

Error read_error(const std::string& path, int errnum, std::string_view what) {
  return Error{fmt::format("{}: {}", one_line(path), what), errnum};
}

Error errno_error(const std::string& path, int errnum) {
  return read_error(path, errnum, errno_string(errnum));
}

Error too_large(const std::string& path, std::size_t max_bytes) {
  return read_error(path, EFBIG, fmt::format("larger than the limit of {} bytes", max_bytes));
}

// The whole content of the file open at `fd`, as RealFileSystem::read_file
// says, from its start whatever the descriptor's offset.
Result<std::string> read_open_file(int fd, const struct stat& st, const std::string& path, std::size_t max_bytes) {
  if (S_ISDIR(st.st_mode))
    return read_error(path, EISDIR, "is a directory, not a file");
  if (!S_ISREG(st.st_mode))
    return read_error(path, EINVAL, "is not a regular file");
  if (static_cast<std::size_t>(st.st_size) > max_bytes)
    return too_large(path, max_bytes);

  std::string text;
  text.resize(static_cast<std::size_t>(st.st_size) + 1);  // +1 sees growth past the limit
  std::size_t used = 0;
  for (;;) {
    if (used == text.size()) {
      if (used > max_bytes)
        return too_large(path, max_bytes);
      text.resize(std::min(text.size() * 2 + 4096, max_bytes + 1));
    }
    ssize_t n = ::pread(fd, text.data() + used, text.size() - used, static_cast<off_t>(used));
    if (n < 0) {
      if (errno == EINTR)
        continue;
      return errno_error(path, errno);
    }
    if (n == 0)
      break;
    used += static_cast<std::size_t>(n);
  }
  if (used > max_bytes)
    return too_large(path, max_bytes);
  text.resize(used);
  return text;
}

std::int64_t nanoseconds(const struct timespec& t) {
  return static_cast<std::int64_t>(t.tv_sec) * 1'000'000'000 + t.tv_nsec;
}

}  // namespace

Result<std::string> RealFileSystem::read_file(const std::string& path, std::size_t max_bytes) const {
  Fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK));
  if (!fd)
    return errno_error(path, errno);
  struct stat st {};
  if (::fstat(fd.get(), &st) < 0)
    return errno_error(path, errno);
  return read_open_file(fd.get(), st, path, max_bytes);
}

PathKind RealFileSystem::kind(const std::string& path) const {
  struct stat st {};
  if (::stat(path.c_str(), &st) < 0)
    return errno == ENOENT || errno == ENOTDIR ? PathKind::kMissing : PathKind::kOther;
  return S_ISDIR(st.st_mode) ? PathKind::kDirectory : PathKind::kOther;
}

// The real file system, but for the watched path as its last look found it.
class FileWatch::Pinned final : public FileSystem {
 public:
  explicit Pinned(const FileWatch& watch) : watch_(watch) {}

  [[nodiscard]] Result<std::string> read_file(const std::string& path, std::size_t max_bytes) const override {
    if (!watch_.pinned_ || path != watch_.path_)
      return real_.read_file(path, max_bytes);
    switch (watch_.found_) {
      case Found::kMissing:
        return errno_error(path, ENOENT);
      case Found::kError:
        return errno_error(path, watch_.error_);
      default: {
        struct stat st {};
        st.st_mode = watch_.directory_ ? S_IFDIR : watch_.regular_ ? S_IFREG : S_IFIFO;
        st.st_size = static_cast<off_t>(watch_.stamp_.size);
        return read_open_file(watch_.fd_.get(), st, path, max_bytes);
      }
    }
  }

  [[nodiscard]] PathKind kind(const std::string& path) const override {
    if (!watch_.pinned_ || path != watch_.path_ || watch_.found_ == Found::kError)
      return real_.kind(path);
    if (watch_.found_ == Found::kMissing)
      return PathKind::kMissing;
    return watch_.directory_ ? PathKind::kDirectory : PathKind::kOther;
  }

 private:
  const FileWatch& watch_;
  RealFileSystem real_;
};

FileWatch::FileWatch(std::string path, std::chrono::nanoseconds settle)
    : path_(std::move(path)), settle_(settle), view_(std::make_unique<Pinned>(*this)) {}

FileWatch::~FileWatch() = default;

bool FileWatch::changed(std::chrono::system_clock::time_point now) {
  release();
  Fd fd(::open(path_.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK));
  struct stat st {};
  Found found = Found::kFile;
  int error = 0;
  if (!fd) {
    error = errno;
    found = error == ENOENT ? Found::kMissing : Found::kError;
  } else if (::fstat(fd.get(), &st) < 0) {
    error = errno;
    found = Found::kError;
    fd.reset();
  }
  FileStamp stamp;
  if (found == Found::kFile) {
    stamp = FileStamp{static_cast<std::uint64_t>(st.st_dev), static_cast<std::uint64_t>(st.st_ino),
                      static_cast<std::int64_t>(st.st_size), nanoseconds(st.st_mtim), nanoseconds(st.st_ctim)};
  }
  if (trusted_ && found == found_ && (found == Found::kMissing || (found == Found::kFile && stamp == stamp_)))
    return false;
  found_ = found;
  error_ = error;
  stamp_ = stamp;
  regular_ = found == Found::kFile && S_ISREG(st.st_mode);
  directory_ = found == Found::kFile && S_ISDIR(st.st_mode);
  const auto changed_at = std::chrono::system_clock::time_point(
      std::chrono::duration_cast<std::chrono::system_clock::duration>(std::chrono::nanoseconds(stamp.ctime_ns)));
  trusted_ = found == Found::kMissing || (found == Found::kFile && now - changed_at >= settle_);
  fd_ = std::move(fd);
  pinned_ = true;
  return true;
}

const FileSystem& FileWatch::file_system() const {
  return *view_;
}

void FileWatch::release() {
  fd_.reset();
  pinned_ = false;
}

void MemoryFileSystem::add_file(std::string path, std::string content) {
  files_[std::move(path)] = std::move(content);
}

void MemoryFileSystem::add_dir(std::string path) {
  dirs_[std::move(path)] = true;
}

Result<std::string> MemoryFileSystem::read_file(const std::string& path, std::size_t max_bytes) const {
  auto it = files_.find(path);
  if (it == files_.end()) {
    if (kind(path) == PathKind::kDirectory)
      return read_error(path, EISDIR, "is a directory, not a file");
    return errno_error(path, ENOENT);
  }
  if (it->second.size() > max_bytes)
    return too_large(path, max_bytes);
  return it->second;
}

PathKind MemoryFileSystem::kind(const std::string& path) const {
  if (files_.count(path) != 0)
    return PathKind::kOther;
  if (dirs_.count(path) != 0)
    return PathKind::kDirectory;
  std::string prefix = path == "/" ? path : path + "/";
  auto it = files_.lower_bound(prefix);
  if (it != files_.end() && it->first.compare(0, prefix.size(), prefix) == 0)
    return PathKind::kDirectory;
  auto dt = dirs_.lower_bound(prefix);
  if (dt != dirs_.end() && dt->first.compare(0, prefix.size(), prefix) == 0)
    return PathKind::kDirectory;
  return PathKind::kMissing;
}

}  // namespace trainit
