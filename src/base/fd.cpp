#include "base/fd.h"

#include <unistd.h>

#include <cerrno>

#include "base/log.h"

namespace trainit {

void Fd::reset(int fd) noexcept {
  int old = std::exchange(fd_, fd);
  if (old >= 0 && ::close(old) < 0 && errno != EINTR) {
    log_debug("close({}) failed: {}", old, errno_string(errno));
  }
}

}  // namespace trainit
