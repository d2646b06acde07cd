#include "base/safe_fs.h"

#include <fcntl.h>
#include <fmt/core.h>
#include <linux/openat2.h>
#include <sys/fsuid.h>
#include <sys/random.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <vector>

#include "base/log.h"

namespace trainit::safe_fs {
namespace {

// The job's user, once trusted: uid + 1 (0: none), and its gid.
std::atomic<uint64_t> g_job_uid{0};
std::atomic<uint32_t> g_job_gid{0};
// openat2 refused with ENOSYS (an old kernel, a seccomp filter): O_NOFOLLOW.
std::atomic<bool> g_no_openat2{false};

bool job_user(uid_t* uid, gid_t* gid) noexcept {
  const uint64_t u = g_job_uid.load(std::memory_order_relaxed);
  if (u == 0) {
    return false;
  }
  *uid = static_cast<uid_t>(u - 1);
  *gid = g_job_gid.load(std::memory_order_relaxed);
  return true;
}

bool trusted_owner(uid_t owner) noexcept {
  uid_t job = 0;
  gid_t group = 0;
  return owner == 0 || owner == ::geteuid() || (job_user(&job, &group) && owner == job);
}

std::string at(std::string_view base, std::string_view name) {
  std::string path(base);
  if (path.empty() || path.back() != '/') {
    path += '/';
  }
  path += name;
  return path;
}

// Why what `st` describes is not to be trusted; empty when it is.
std::string distrust(const struct stat& st) {
  if (!trusted_owner(st.st_uid)) {
    return fmt::format("owned by uid {}, neither trainit's user nor the job's; refused", st.st_uid);
  }
  if (S_ISDIR(st.st_mode) && (st.st_mode & S_IWOTH) != 0 && (st.st_mode & S_ISVTX) == 0) {
    return "writable by every user, without the sticky bit; refused";
  }
  return {};
}

std::string open_failure(int e) {
  switch (e) {
    case ELOOP:
      return "a symbolic link is there; refused";
    case ENXIO:
      return "a FIFO is there; refused";
    case EXDEV:
      return "a link out of its directory is there; refused";
    default:
      return errno_string(e);
  }
}

// One component `name` beneath `dir`, never through a link. Returns the fd
// or -errno.
int open_beneath(int dir, const std::string& name, int flags, mode_t mode) noexcept {
  flags |= O_CLOEXEC | O_NOFOLLOW;
  if (!g_no_openat2.load(std::memory_order_relaxed)) {
    open_how how{};
    how.flags = static_cast<uint64_t>(flags);
    how.mode = (flags & (O_CREAT | O_TMPFILE)) != 0 ? mode : 0;
    how.resolve = RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS | RESOLVE_BENEATH;
    const long fd = ::syscall(SYS_openat2, dir, name.c_str(), &how, sizeof how);
    if (fd >= 0) {
      return static_cast<int>(fd);
    }
    if (errno != ENOSYS && errno != EPERM) {
      return -errno;
    }
    g_no_openat2.store(true, std::memory_order_relaxed);
  }
  const int fd = ::openat(dir, name.c_str(), flags, mode);
  return fd >= 0 ? fd : -errno;
}

// The components of a path, a relative one after the working directory's
// (as the kernel has it: no link in it); an error for "..".
Result<std::vector<std::string>> components(std::string_view path) {
  std::string whole(path);
  if (path.empty() || path.front() != '/') {
    char cwd[4096];
    if (::getcwd(cwd, sizeof cwd) == nullptr) {
      return Error{fmt::format("{}: the working directory: {}", path, errno_string(errno)), errno};
    }
    whole = at(cwd, path);
  }
  path = whole;
  std::vector<std::string> out;
  while (!path.empty()) {
    const size_t slash = path.find('/');
    const std::string_view part = path.substr(0, slash);
    path.remove_prefix(slash == std::string_view::npos ? path.size() : slash + 1);
    if (part.empty() || part == ".") {
      continue;
    }
    if (part == "..") {
      return Error{fmt::format("{}: '..' in the path; refused", whole), EINVAL};
    }
    out.emplace_back(part);
  }
  return out;
}

// Checks the directory open at `fd`; the error names `path`.
Result<void> check_dir(int fd, const std::string& path) {
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    return Error{fmt::format("{}: {}", path, errno_string(errno)), errno};
  }
  if (std::string why = distrust(st); !why.empty()) {
    return Error{fmt::format("{}: {}", path, why), EPERM};
  }
  return {};
}

// While it lives, files are created as the job's user (fsuid, fsgid) when
// trainit is root and `dir` is the job user's: where trainit may not switch
// (its CAP_SETUID dropped), nothing changes and the caller hands the file
// over after.
class AsDirOwner {
 public:
  explicit AsDirOwner(int dir) noexcept {
    uid_t uid = 0;
    gid_t gid = 0;
    struct stat st {};
    if (::geteuid() != 0 || !job_user(&uid, &gid) || ::fstat(dir, &st) != 0 || st.st_uid != uid || uid == 0) {
      return;
    }
    old_gid_ = ::setfsgid(gid);
    old_uid_ = ::setfsuid(uid);
  }
  ~AsDirOwner() {
    if (old_uid_ >= 0) {
      ::setfsuid(static_cast<uid_t>(old_uid_));
      ::setfsgid(static_cast<gid_t>(old_gid_));
    }
  }
  AsDirOwner(const AsDirOwner&) = delete;
  AsDirOwner& operator=(const AsDirOwner&) = delete;

 private:
  int old_uid_ = -1;
  int old_gid_ = -1;
};

std::string unguessable_name(std::string_view base) {
  uint64_t id = 0;
  if (::getrandom(&id, sizeof id, GRND_NONBLOCK) != static_cast<ssize_t>(sizeof id)) {
    timespec now{};
    ::clock_gettime(CLOCK_MONOTONIC, &now);
    id = static_cast<uint64_t>(now.tv_nsec) * 0x9e3779b97f4a7c15ULL ^ static_cast<uint64_t>(now.tv_sec);
  }
  return fmt::format("{}.tmp-{:016x}", base, id);
}

Result<Fd> walk(std::string_view path, bool create, mode_t mode, Give give, bool* made) {
  auto parts = components(path);
  if (!parts) {
    return parts.error();
  }
  if (made != nullptr) {
    *made = false;
  }
  std::string so_far = "/";
  Fd dir(::open("/", O_PATH | O_DIRECTORY | O_CLOEXEC));
  if (!dir) {
    return Error{fmt::format("/: {}", errno_string(errno)), errno};
  }
  if (auto r = check_dir(dir.get(), so_far); !r) {
    return r.error();
  }
  for (size_t i = 0; i < parts->size(); ++i) {
    const std::string& name = (*parts)[i];
    const bool last = i + 1 == parts->size();
    so_far = at(so_far, name);
    // The last is opened for reading (fchmod, fchown and *at() need it);
    // the others only to go through.
    const int flags = O_DIRECTORY | (last ? O_RDONLY : O_PATH);
    int fd = open_beneath(dir.get(), name, flags, 0);
    bool made_here = false;
    if (fd == -ENOENT && create) {
      const mode_t own = last ? mode : 0755;
      if (::mkdirat(dir.get(), name.c_str(), own) == 0) {
        made_here = true;
      } else if (errno != EEXIST) {
        return Error{fmt::format("{}: {}", so_far, errno_string(errno)), errno};
      }
      fd = open_beneath(dir.get(), name, O_DIRECTORY | O_RDONLY, 0);
    }
    if (fd == -ENOTDIR || fd == -ELOOP) {  // O_DIRECTORY may say which first: a link is named as one
      struct stat st {};
      const bool link = ::fstatat(dir.get(), name.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISLNK(st.st_mode);
      fd = link ? -ELOOP : -ENOTDIR;
    }
    if (fd < 0) {
      return Error{fmt::format("{}: {}", so_far, fd == -ENOTDIR ? "not a directory" : open_failure(-fd)), -fd};
    }
    Fd next(fd);
    if (made_here) {
      // Its mode exactly, whatever the umask; then whose it is.
      if (::fchmod(next.get(), last ? mode : 0755) != 0 ||
          (last && give == Give::kJob && give_to_job(next.get()) != 0)) {
        const int e = errno;
        return Error{fmt::format("{}: {}", so_far, errno_string(e)), e};
      }
    } else if (auto r = check_dir(next.get(), so_far); !r) {
      return r.error();
    }
    if (last && made != nullptr) {
      *made = made_here;
    }
    dir = std::move(next);
  }
  if (parts->empty()) {  // "/" itself, for reading
    dir.reset(::open("/", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    if (!dir) {
      return Error{fmt::format("/: {}", errno_string(errno)), errno};
    }
  }
  return dir;
}

std::pair<std::string_view, std::string_view> split(std::string_view path) {
  const size_t slash = path.rfind('/');
  if (slash == std::string_view::npos) {
    return {std::string_view(), path};
  }
  return {slash == 0 ? std::string_view("/") : path.substr(0, slash), path.substr(slash + 1)};
}

}  // namespace

void trust_job_user(uid_t uid, gid_t gid) noexcept {
  g_job_gid.store(gid, std::memory_order_relaxed);
  g_job_uid.store(uint64_t{uid} + 1, std::memory_order_relaxed);
}

void forget_job_user() noexcept {
  g_job_uid.store(0, std::memory_order_relaxed);
}

Result<Fd> open_dir(std::string_view path) {
  return walk(path, false, 0, Give::kTrainit, nullptr);
}

Result<Fd> make_dirs(std::string_view path, mode_t mode, Give give, bool* made) {
  return walk(path, true, mode, give, made);
}

Result<Fd> open_at(int dir, std::string_view name, int flags, mode_t mode) {
  if (name.empty() || name == "." || name == ".." || name.find('/') != std::string_view::npos) {
    return Error{fmt::format("{}: not a file name; refused", name), EINVAL};
  }
  int fd = -EINVAL;
  {
    AsDirOwner as_owner(dir);
    fd = open_beneath(dir, std::string(name), flags | O_NOCTTY | O_NONBLOCK, mode);
  }
  if (fd < 0) {
    return Error{open_failure(-fd), -fd};
  }
  Fd file(fd);
  struct stat st {};
  if (::fstat(file.get(), &st) != 0) {
    return Error{errno_string(errno), errno};
  }
  if (!S_ISREG(st.st_mode)) {
    return Error{"not a regular file (something was planted there); refused", EINVAL};
  }
  if (st.st_nlink > 1) {
    return Error{fmt::format("a regular file with {} names (a hard link to a file elsewhere?); refused", st.st_nlink),
                 EMLINK};
  }
  if (std::string why = distrust(st); !why.empty()) {
    return Error{why, EPERM};
  }
  if ((flags & O_NONBLOCK) == 0) {
    const int fl = ::fcntl(file.get(), F_GETFL);
    if (fl < 0 || ::fcntl(file.get(), F_SETFL, fl & ~O_NONBLOCK) < 0) {
      return Error{errno_string(errno), errno};
    }
  }
  return file;
}

Result<Fd> open_file(std::string_view path, int flags, mode_t mode) {
  const auto [dir_path, name] = split(path);
  auto dir = open_dir(dir_path);
  if (!dir) {
    return dir.error();
  }
  return open_at(dir->get(), name, flags, mode);
}

Result<void> write_atomically(std::string_view path, std::string_view content, mode_t mode, Give give) {
  const auto [dir_path, name] = split(path);
  auto dir = open_dir(dir_path);
  if (!dir) {
    return dir.error();
  }
  // A name nobody can guess, made with O_EXCL: what someone else created (a
  // link, a directory planted beside it) is never written through, never
  // removed, and cannot stand in the way: another name is tried.
  std::string tmp;
  Result<Fd> file = Error{"no name", EEXIST};
  for (int attempt = 0; attempt < 8 && !file && file.error().errnum == EEXIST; ++attempt) {
    tmp = unguessable_name(name);
    file = open_at(dir->get(), tmp, O_WRONLY | O_CREAT | O_EXCL, mode);
  }
  if (!file) {
    return file.error();
  }
  auto failed = [&](int e) {
    (void)::unlinkat(dir->get(), tmp.c_str(), 0);
    return Error{errno_string(e), e};
  };
  for (size_t done = 0; done < content.size();) {
    const ssize_t n = ::write(file->get(), content.data() + done, content.size() - done);
    if (n < 0 && errno == EINTR) {
      continue;
    }
    if (n <= 0) {
      return failed(n < 0 ? errno : ENOSPC);
    }
    done += static_cast<size_t>(n);
  }
  if (::fchmod(file->get(), mode) != 0) {
    return failed(errno);
  }
  if (give == Give::kJob) {
    if (int r = give_to_job(file->get()); r < 0) {
      return failed(-r);
    }
  }
  if (::close(file->release()) != 0) {
    return failed(errno);
  }
  if (::renameat(dir->get(), tmp.c_str(), dir->get(), std::string(name).c_str()) != 0) {
    return failed(errno);
  }
  return {};
}

int remove_at(int dir, std::string_view name) noexcept {
  if (name.empty() || name == "." || name == ".." || name.find('/') != std::string_view::npos) {
    return -EINVAL;
  }
  return ::unlinkat(dir, std::string(name).c_str(), 0) == 0 || errno == ENOENT ? 0 : -errno;
}

int give_to_job(int fd) noexcept {
  uid_t uid = 0;
  gid_t gid = 0;
  if (!job_user(&uid, &gid)) {
    return 0;
  }
  return ::fchown(fd, uid, gid) == 0 ? 0 : -errno;
}

}  // namespace trainit::safe_fs
