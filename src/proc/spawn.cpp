#include "proc/spawn.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <termios.h>
#include <unistd.h>

#include <cerrno>

#include "base/fd.h"
#include "base/log.h"

extern char** environ;

namespace trainit {
namespace {

// What a child reports through the exec pipe when it cannot go on.
struct ChildFailure {
  int stage;  // index into kStages
  int errnum;
};

constexpr const char* kStages[] = {"set up the process group", "change directory", "install stdio", "restore signals",
                                   "execute"};
enum Stage { kGroup, kChdir, kStdio, kSignals, kExec };

[[noreturn]] void child_fail(int pipe_fd, Stage stage, int errnum, int status) {
  ChildFailure failure{stage, errnum};
  ssize_t unused = ::write(pipe_fd, &failure, sizeof(failure));
  (void)unused;
  ::_exit(status);
}

int install(int from, int to) {
  if (from < 0 || from == to) {
    return 0;
  }
  return ::dup2(from, to) < 0 ? -1 : 0;
}

// Runs in the child, between fork and exec. trainit is single-threaded, so the
// child may use any function; it must not return.
[[noreturn]] void child_main(const SpawnOptions& options, char* const* argv, char* const* envp, int pipe_fd) {
  switch (options.grouping) {
    case Grouping::kProcessGroup:
      if (::setpgid(0, 0) < 0) {
        child_fail(pipe_fd, kGroup, errno, 126);
      }
      break;
    case Grouping::kSession:
      if (::setsid() < 0) {
        child_fail(pipe_fd, kGroup, errno, 126);
      }
      break;
    case Grouping::kInherit:
      break;
  }
  // SIGTTOU is still ignored here (trainit's setting), so a background
  // process may take the terminal without being stopped.
  if (options.foreground && options.grouping != Grouping::kInherit && ::isatty(STDIN_FILENO) == 1 &&
      ::tcsetpgrp(STDIN_FILENO, ::getpgrp()) < 0 && errno != ENOTTY && errno != ENXIO) {
    child_fail(pipe_fd, kGroup, errno, 126);
  }
  if (!options.cwd.empty() && ::chdir(options.cwd.c_str()) < 0) {
    child_fail(pipe_fd, kChdir, errno, 126);
  }
  if (install(options.stdin_fd, STDIN_FILENO) < 0 || install(options.stdout_fd, STDOUT_FILENO) < 0 ||
      install(options.stderr_fd, STDERR_FILENO) < 0) {
    child_fail(pipe_fd, kStdio, errno, 126);
  }
  if (options.signals != nullptr) {
    int r = restore_signal_state(*options.signals);
    if (r < 0) {
      child_fail(pipe_fd, kSignals, -r, 126);
    }
  }
  ::execvpe(argv[0], argv, envp);
  child_fail(pipe_fd, kExec, errno, exec_failure_status(errno));
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
  return errnum == ENOENT || errnum == ENOTDIR ? 127 : 126;
}

Result<Spawned> spawn(const SpawnOptions& options) {
  if (options.argv.empty() || options.argv[0].empty()) {
    return Error{"no program to run", EINVAL};
  }
  // Everything the child needs is prepared before fork.
  std::vector<char*> argv = c_strings(options.argv);
  std::vector<char*> env_storage;
  char* const* envp = environ;
  if (options.env != nullptr) {
    env_storage = c_strings(*options.env);
    envp = env_storage.data();
  }

  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) < 0) {
    int e = errno;
    return Error{fmt::format("cannot start '{}': pipe: {}", options.argv[0], errno_string(e)), e};
  }
  Fd read_end(fds[0]);
  Fd write_end(fds[1]);

  pid_t pid = ::fork();
  if (pid < 0) {
    int e = errno;
    return Error{fmt::format("cannot start '{}': fork: {}", options.argv[0], errno_string(e)), e};
  }
  if (pid == 0) {
    child_main(options, argv.data(), envp, write_end.get());
  }
  write_end.reset();

  // exec closes the pipe (O_CLOEXEC): end of file means the program runs.
  ChildFailure failure{};
  ssize_t n;
  do {
    n = ::read(read_end.get(), &failure, sizeof(failure));
  } while (n < 0 && errno == EINTR);
  if (n != static_cast<ssize_t>(sizeof(failure))) {
    return Spawned{pid};
  }
  const char* stage = failure.stage >= 0 && failure.stage <= kExec ? kStages[failure.stage] : "start";
  if (failure.stage == kExec) {
    return Error{fmt::format("cannot execute '{}': {}", options.argv[0], errno_string(failure.errnum)), failure.errnum};
  }
  return Error{fmt::format("cannot start '{}': {}: {}", options.argv[0], stage, errno_string(failure.errnum)),
               failure.errnum};
}

}  // namespace trainit
