#include "proc/spawn.h"

#include <fcntl.h>
#include <fmt/core.h>
#include <termios.h>
#include <unistd.h>

#include <cerrno>

#include "base/exit_code.h"
#include "base/fd.h"
#include "base/log.h"

extern char** environ;

namespace trainit {
namespace {

// What a child reports when it cannot go on. The child shares our memory
// (vfork) and we are suspended until it execs or exits, so it writes straight
// into the parent's copy: no pipe, no extra wake-up.
struct ChildFailure {
  int stage = -1;  // index into kStages; -1: the program runs
  int errnum = 0;
};

constexpr const char* kStages[] = {
    "set up the process group",     "change directory", "install stdio", "restore signals",
    "switch user and capabilities", "execute"};
enum Stage { kGroup, kChdir, kStdio, kSignals, kCredentials, kExec };

[[noreturn]] void child_fail(ChildFailure* failure, Stage stage, int errnum, int status) {
  failure->stage = stage;
  failure->errnum = errnum;
  ::_exit(status);
}

int install(int from, int to) {
  if (from < 0 || from == to) {
    return 0;
  }
  return ::dup2(from, to) < 0 ? -1 : 0;
}

// "LISTEN_PID=" and room for any pid, written by the child (set_listen_pid).
struct ListenPid {
  char text[32] = "LISTEN_PID=";
  char** slot = nullptr;  // the entry of the child's environment it replaces; null: none
};

// The child's own pid into `listen`, by hand: no allocation, no locale.
void set_listen_pid(ListenPid& listen) {
  if (listen.slot == nullptr) {
    return;
  }
  char digits[16];
  size_t n = 0;
  for (auto pid = static_cast<unsigned long>(::getpid()); n == 0 || pid > 0; pid /= 10) {
    digits[n++] = static_cast<char>('0' + pid % 10);
  }
  char* out = listen.text + sizeof("LISTEN_PID=") - 1;
  while (n > 0) {
    *out++ = digits[--n];
  }
  *out = '\0';
  *listen.slot = listen.text;
}

// Runs in the vfork child, between vfork and exec, in our memory: only
// system-call wrappers, no allocation, nothing that takes a lock.
[[noreturn]] void child_main(const SpawnOptions& options, char* const* argv, char* const* envp, ListenPid& listen,
                             ChildFailure* failure) {
  switch (options.grouping) {
    case Grouping::kProcessGroup:
      if (::setpgid(0, 0) < 0) {
        child_fail(failure, kGroup, errno, exit_code::kOsError);
      }
      break;
    case Grouping::kSession:
      if (::setsid() < 0) {
        child_fail(failure, kGroup, errno, exit_code::kOsError);
      }
      break;
    case Grouping::kInherit:
      break;
  }
  // SIGTTOU is still ignored here (trainit's setting), so a background
  // process may take the terminal without being stopped.
  if (options.foreground && options.grouping != Grouping::kInherit && ::isatty(STDIN_FILENO) == 1 &&
      ::tcsetpgrp(STDIN_FILENO, ::getpgrp()) < 0 && errno != ENOTTY && errno != ENXIO) {
    child_fail(failure, kGroup, errno, exit_code::kOsError);
  }
  if (!options.cwd.empty() && ::chdir(options.cwd.c_str()) < 0) {
    child_fail(failure, kChdir, errno, exit_code::kOsError);
  }
  if (install(options.stdin_fd, STDIN_FILENO) < 0 || install(options.stdout_fd, STDOUT_FILENO) < 0 ||
      install(options.stderr_fd, STDERR_FILENO) < 0) {
    child_fail(failure, kStdio, errno, exit_code::kOsError);
  }
  for (const int fd : options.inherit_fds) {
    if (::fcntl(fd, F_SETFD, 0) < 0) {
      child_fail(failure, kStdio, errno, exit_code::kOsError);
    }
  }
  if (options.signals != nullptr) {
    int r = restore_signal_state(*options.signals);
    if (r < 0) {
      child_fail(failure, kSignals, -r, exit_code::kOsError);
    }
  }
  if (options.credentials != nullptr) {
    int r = options.credentials->apply();
    if (r < 0) {
      child_fail(failure, kCredentials, -r, exit_code::kOsError);
    }
  }
  set_listen_pid(listen);
  ::execvpe(argv[0], argv, envp);
  child_fail(failure, kExec, errno, exec_failure_status(errno));
}

std::vector<char*> c_strings(const std::vector<std::string>& strings) {
  std::vector<char*> out;
  out.reserve(strings.size() + 1);
  for (const auto& s : strings) {
    out.push_back(const_cast<char*>(s.c_str()));
  }
  out.push_back(nullptr);
  return out;
}

}  // namespace

int exec_failure_status(int errnum) noexcept {
  return errnum == ENOENT || errnum == ENOTDIR ? exit_code::kNotFound : exit_code::kCannotExecute;
}

Result<Spawned> spawn(const SpawnOptions& options) {
  if (options.argv.empty() || options.argv[0].empty()) {
    return Error{"no program to run", EINVAL, exit_code::kUsage};
  }
  // Everything the child needs is prepared before vfork.
  std::vector<char*> argv = c_strings(options.argv);
  std::vector<char*> env_storage;
  char* const* envp = environ;
  if (options.env != nullptr) {
    env_storage = c_strings(*options.env);
    envp = env_storage.data();
  }
  ListenPid listen;
  if (options.pass_socket_activation) {
    const std::string mine = fmt::format("LISTEN_PID={}", ::getpid());
    for (size_t i = 0; envp[i] != nullptr; ++i) {
      if (mine == envp[i]) {
        if (env_storage.empty()) {  // the child rewrites its own copy, never environ
          for (size_t j = 0; environ[j] != nullptr; ++j) {
            env_storage.push_back(environ[j]);
          }
          env_storage.push_back(nullptr);
          envp = env_storage.data();
        }
        listen.slot = &env_storage[i];
        break;
      }
    }
  }

  // vfork: no page tables to copy, no copy-on-write faults after, and we
  // resume only once the child has exec'd or failed. The child runs on our
  // stack below this frame and never returns into it.
  ChildFailure failure;
  // The child's write to `failure` happens behind the compiler's back: tell
  // it the object escapes, and that memory changed once vfork returns.
  asm volatile("" : : "r"(&failure) : "memory");
  // vfork is what posix_spawn uses; the child only makes system calls.
  pid_t pid = ::vfork();  // NOLINT(clang-analyzer-security.insecureAPI.vfork)
  if (pid == 0) {
    child_main(options, argv.data(), envp, listen, &failure);  // NOLINT(clang-analyzer-unix.Vfork)
  }
  asm volatile("" : : : "memory");
  if (pid < 0) {
    int e = errno;
    return Error{fmt::format("cannot start '{}': vfork: {}", options.argv[0], errno_string(e)), e, exit_code::kOsError};
  }
  if (failure.stage < 0) {
    return Spawned{pid};
  }
  const int failed_stage = failure.stage;
  const int errnum = failure.errnum;
  const char* stage = failed_stage >= 0 && failed_stage <= kExec ? kStages[failed_stage] : "start";
  if (failed_stage == kExec) {
    return Error{fmt::format("cannot execute '{}': {}", options.argv[0], errno_string(errnum)), errnum,
                 exec_failure_status(errnum)};
  }
  return Error{fmt::format("cannot start '{}': {}: {}", options.argv[0], stage, errno_string(errnum)), errnum,
               exit_code::kOsError};
}

}  // namespace trainit
