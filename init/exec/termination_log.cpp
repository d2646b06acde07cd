#include "exec/termination_log.h"

#include <fcntl.h>
#include <fmt/core.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <utility>

#include "base/fd.h"
#include "base/log.h"
#include "base/redact.h"
#include "base/safe_fs.h"
#include "base/utf8.h"

namespace trainit {

namespace {

// The message as the termination log holds it: its secrets hidden, then
// cut, then what is not printable UTF-8 (controls, C1 included; malformed
// bytes) as \xNN, never cut inside an escape, within kTerminationLogMax with
// its newline.
std::string termination_text(std::string_view line) {
  const std::string hidden = redact(line);
  std::string text(4 * hidden.size(), '\0');
  text.resize(escape_unprintable_into(hidden, text.data(), text.size()));
  if (text.size() > kTerminationLogMax - 1) {
    constexpr std::string_view kCut = "...";
    text.resize(escape_unprintable_into(hidden, text.data(), kTerminationLogMax - 1 - kCut.size()));
    text += kCut;
  }
  return text + "\n";
}

}  // namespace

// Opened as a rank's log file is (base/safe_fs.h), but never created.
Result<void> write_termination_log(const std::string& path, std::string_view line) {
  auto failed = [&](int e, std::string_view why) {
    return Error{fmt::format("cannot write the termination message to {}: {}", path, why), e};
  };
  // Written only where the file is there: none is none, whoever owns the
  // directories on the way (in a user namespace "/" is an unmapped user's).
  if (struct stat st{}; ::lstat(path.c_str(), &st) != 0 && errno == ENOENT) {
    return failed(ENOENT, "there is no such file");
  }
  auto file = safe_fs::open_file(path, O_WRONLY);
  if (!file) {
    return failed(file.error().errnum, file.error().message);
  }
  Fd fd = std::move(*file);
  // One write of the whole message from the start: a reader sees the old
  // content, nothing, or all of it.
  const std::string text = termination_text(line);
  if (::ftruncate(fd.get(), 0) < 0) {
    const int e = errno;
    return failed(e, errno_string(e));
  }
  const ssize_t n = ::pwrite(fd.get(), text.data(), text.size(), 0);
  if (n != static_cast<ssize_t>(text.size())) {
    const int e = n < 0 ? errno : ENOSPC;
    return failed(e, errno_string(e));
  }
  return {};
}

}  // namespace trainit
