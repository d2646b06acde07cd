#include "proc/tree.h"

#include <dirent.h>
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "base/fd.h"

namespace trainit {
namespace {

// Appends the children listed by one /proc/<pid>/task/<tid>/children file.
void read_children(const char* path, std::vector<pid_t>& out) {
  Fd fd(::open(path, O_RDONLY | O_CLOEXEC));
  if (!fd) {
    return;
  }
  char buf[4096];
  pid_t pid = 0;
  bool in_number = false;
  ssize_t n;
  while ((n = ::read(fd.get(), buf, sizeof(buf))) > 0) {
    for (ssize_t i = 0; i < n; ++i) {
      char c = buf[i];
      if (c >= '0' && c <= '9') {
        pid = pid * 10 + (c - '0');
        in_number = true;
      } else if (in_number) {
        out.push_back(pid);
        pid = 0;
        in_number = false;
      }
    }
  }
  if (in_number) {
    out.push_back(pid);
  }
}

void children_of(pid_t pid, std::vector<pid_t>& out) {
  char dir_path[64];
  (void)std::snprintf(dir_path, sizeof(dir_path), "/proc/%d/task", static_cast<int>(pid));
  DIR* dir = ::opendir(dir_path);
  if (dir == nullptr) {
    return;
  }
  while (const struct dirent* entry = ::readdir(dir)) {
    if (entry->d_name[0] < '0' || entry->d_name[0] > '9') {
      continue;
    }
    char path[96];
    (void)std::snprintf(path, sizeof(path), "/proc/%d/task/%.16s/children", static_cast<int>(pid), entry->d_name);
    read_children(path, out);
  }
  ::closedir(dir);
}

}  // namespace

// Whether the /proc we see is our PID namespace's: a PID 1 started without
// its own /proc mount (unshare --pid without --mount-proc) sees the host's,
// whose pids mean other processes here.
bool proc_is_ours() {
  char link[32] = {};
  ssize_t n = ::readlink("/proc/self", link, sizeof(link) - 1);
  if (n <= 0) {
    return false;
  }
  char self[32];
  int len = std::snprintf(self, sizeof(self), "%d", static_cast<int>(::getpid()));
  return len == n && std::memcmp(link, self, static_cast<size_t>(n)) == 0;
}

std::vector<pid_t> list_descendants(pid_t root) {
  std::vector<pid_t> out;
  if (!proc_is_ours()) {
    return out;
  }
  children_of(root, out);
  for (size_t i = 0; i < out.size(); ++i) {  // grows as we go: breadth first
    children_of(out[i], out);
  }
  return out;
}

namespace {

// signo, then SIGCONT after a stop signal. Returns whether signo was sent.
bool send_stop(pid_t target, int signo) {
  if (::kill(target, signo) != 0) {
    return false;
  }
  if (signo != SIGKILL && signo != SIGCONT) {
    ::kill(target, SIGCONT);
  }
  return true;
}

// As PID 1: the processes of our namespace that are no descendants of ours
// (`docker exec`, `nsenter`: their parents are outside) get the signal too,
// from the namespace's own /proc only. They are not waited for: not ours.
int signal_strangers(int signo, const std::vector<pid_t>& seen, const std::function<bool(pid_t)>& skip) {
  if (!proc_is_ours()) {
    return 0;
  }
  DIR* dir = ::opendir("/proc");
  if (dir == nullptr) {
    return 0;
  }
  int signalled = 0;
  while (const struct dirent* entry = ::readdir(dir)) {
    char* end = nullptr;
    const long pid = std::strtol(entry->d_name, &end, 10);
    if (entry->d_name[0] < '1' || entry->d_name[0] > '9' || *end != '\0' || pid <= 1 ||
        std::binary_search(seen.begin(), seen.end(), static_cast<pid_t>(pid)) || skip(static_cast<pid_t>(pid))) {
      continue;
    }
    signalled += send_stop(static_cast<pid_t>(pid), signo) ? 1 : 0;
  }
  ::closedir(dir);
  return signalled;
}

}  // namespace

int signal_all_except(bool pid1, int signo, pid_t known_group, const std::function<bool(pid_t)>& skip) {
  if (pid1 && signo == SIGKILL) {
    return send_stop(-1, SIGKILL) ? 1 : 0;  // our own namespace only: we are its init
  }
  std::vector<pid_t> seen;  // sorted: every pid a walk found
  int signalled = 0;
  bool walked = false;
  for (int walk = 0; walk < kMaxWalks; ++walk) {
    std::vector<pid_t> descendants = list_descendants(::getpid());
    walked = walked || !descendants.empty();
    bool found_new = false;
    for (pid_t pid : descendants) {
      auto at = std::lower_bound(seen.begin(), seen.end(), pid);
      if (at != seen.end() && *at == pid) {
        continue;
      }
      seen.insert(at, pid);
      found_new = true;
      if (!skip(pid)) {
        signalled += send_stop(pid, signo) ? 1 : 0;
      }
    }
    if (!found_new) {
      break;
    }
  }
  if (!walked) {
    if (pid1) {
      return send_stop(-1, signo) ? 1 : 0;  // inside our own PID namespace: everything but us
    }
    return known_group > 0 && send_stop(-known_group, signo) ? 1 : 0;
  }
  if (pid1) {
    signalled += signal_strangers(signo, seen, skip);
  }
  return signalled;
}

int signal_all(bool pid1, int signo, pid_t known_group, pid_t skip) {
  return signal_all_except(pid1, signo, known_group, [skip](pid_t pid) { return pid == skip; });
}

}  // namespace trainit
