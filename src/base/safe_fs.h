// The one way PID 1 touches the file system: every path it creates or
// writes (rank logs, the status file, the termination message, error files,
// the plan's files, its private directory, sshd's files) goes through here.
//
// A path is walked from "/" one component at a time, each opened beneath the
// last without following a symbolic link (openat2 RESOLVE_NO_SYMLINKS |
// RESOLVE_NO_MAGICLINKS | RESOLVE_BENEATH; an O_NOFOLLOW openat where the
// kernel or its seccomp filter lacks openat2), so a link planted anywhere in
// the path is refused, not followed; "." and ".." are refused. Every
// directory on the way and every file opened must be trusted: owned by
// root, by trainit's own user or by the job's (trust_job_user), and a
// directory writable by every user must have the sticky bit (/tmp). Files
// must be regular with one name (no FIFO to block on, no hard link to a file
// elsewhere). Ownership and modes are changed on descriptors, never on
// names. Where trainit is root and the directory is the job's user's, a new
// file is created as that user (fsuid/fsgid), so the kernel applies the
// job's permissions to what a rank planted there.
//
// Errors say what was refused and why, in a few words, naming the path
// component ("/mnt/log: a symbolic link; refused").
#pragma once

#include <sys/stat.h>
#include <sys/types.h>

#include <string>
#include <string_view>

#include "base/fd.h"
#include "base/result.h"

namespace trainit::safe_fs {

// From now on files and directories of `uid` are trusted too, and
// give_to_job() hands things to uid:gid (--user).
void trust_job_user(uid_t uid, gid_t gid) noexcept;
// Back to root and trainit's own user only (tests).
void forget_job_user() noexcept;

// The directory `path` (absolute), opened for the *at() calls.
[[nodiscard]] Result<Fd> open_dir(std::string_view path);

// Where make_dirs() leaves the directory it made last.
enum class Give { kTrainit, kJob };

// mkdir -p: every missing component of `path` made beneath its checked
// parent. The last, when made here, gets `mode` exactly (umask aside) and,
// with Give::kJob, the job's user; the others 0755, trainit's. `made` (when
// given) tells whether the last was made here.
[[nodiscard]] Result<Fd> make_dirs(std::string_view path, mode_t mode = 0755, Give give = Give::kTrainit,
                                   bool* made = nullptr);

// Opens `name` (one component) in the checked directory `dir`: O_NOFOLLOW,
// O_NOCTTY and O_CLOEXEC are added, and O_NONBLOCK while opening (a FIFO
// without a reader fails at once with ENXIO); the file must be a trusted
// regular file of one name.
[[nodiscard]] Result<Fd> open_at(int dir, std::string_view name, int flags, mode_t mode = 0);
// open_dir() of the path's directory, then open_at().
[[nodiscard]] Result<Fd> open_file(std::string_view path, int flags, mode_t mode = 0);

// Replaces `path` whole: a new file of a random name made beside it with
// O_EXCL, written, given `mode` (and the job's user with Give::kJob), then
// renamed over it. A reader sees the old content or the new, never part.
[[nodiscard]] Result<void> write_atomically(std::string_view path, std::string_view content, mode_t mode,
                                            Give give = Give::kTrainit);

// Removes `name` from the checked directory `dir` (a link itself, never
// what it points to). 0 or -errno; 0 when there was nothing.
int remove_at(int dir, std::string_view name) noexcept;

// The job's user takes the file or directory open at `fd`; 0 or -errno; 0
// when there is no job user.
int give_to_job(int fd) noexcept;

}  // namespace trainit::safe_fs
