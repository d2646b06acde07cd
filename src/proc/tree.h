// Our descendants, for signalling them when trainit is not PID 1.
//
// As PID 1, kill(-1, sig) reaches every process in our namespace but us. As
// a subreaper on a shared machine that would be everything the user owns, so
// trainit walks its own tree instead: /proc/<pid>/task/<tid>/children from
// itself down. Processes that left the tree (reparented to someone else's
// subreaper or to the real init) are not ours and are never touched.
#pragma once

#include <sys/types.h>

#include <functional>
#include <vector>

namespace trainit {

// Every living descendant of `root`, parents before children. Empty when
// /proc is not mounted or is another PID namespace's (a PID 1 without its own
// /proc sees the host's): the caller then falls back to kill(-1) as PID 1, or
// to the groups it knows.
[[nodiscard]] std::vector<pid_t> list_descendants(pid_t root);

// Sends `signo` to every process trainit is responsible for but `skip` (a
// process the caller has signalled already; 0: none), each once, and follows
// a stop signal (anything but SIGKILL and SIGCONT) with SIGCONT, so that a
// stopped process (SIGSTOP, `docker pause`) sees it now.
//   - SIGKILL as PID 1: kill(-1, SIGKILL), which no process of our namespace
//     escapes, not even one forked meanwhile.
//   - Otherwise our descendants, walked again until a walk finds none it
//     has not signalled (a child forked between reading /proc and the
//     kill() is found by the next walk; at most kMaxWalks walks); then, as
//     PID 1, the namespace's other processes, those whose parents are
//     outside it (`docker exec`, `nsenter`), from its own /proc: they get
//     the signal, but are not trainit's to wait for.
// When the walk finds none (no /proc), one sweep instead: kill(-1) as PID 1
// (our namespace only; it reaches `skip` too), else `known_group`'s process
// group (when > 0). Returns how many processes or groups were signalled.
int signal_all(bool pid1, int signo, pid_t known_group, pid_t skip = 0);
inline constexpr int kMaxWalks = 16;
// The same, skipping every process for which `skip` returns true (e.g. the
// members of groups the caller has signalled already).
int signal_all_except(bool pid1, int signo, pid_t known_group, const std::function<bool(pid_t)>& skip);

}  // namespace trainit
