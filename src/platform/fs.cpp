#include "platform/fs.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>

#include "base/fd.h"
#include "base/log.h"
#include "platform/text.h"

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

}  // namespace

Result<std::string> RealFileSystem::read_file(const std::string& path, std::size_t max_bytes) const {
  Fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK));
  if (!fd)
    return errno_error(path, errno);
  struct stat st {};
  if (::fstat(fd.get(), &st) < 0)
    return errno_error(path, errno);
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
    ssize_t n = ::read(fd.get(), text.data() + used, text.size() - used);
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

PathKind RealFileSystem::kind(const std::string& path) const {
  struct stat st {};
  if (::stat(path.c_str(), &st) < 0)
    return errno == ENOENT || errno == ENOTDIR ? PathKind::kMissing : PathKind::kOther;
  return S_ISDIR(st.st_mode) ? PathKind::kDirectory : PathKind::kOther;
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
