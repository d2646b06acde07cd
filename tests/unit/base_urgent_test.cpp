// UrgentSection against the real kernel: the thread's scheduling policy
// inside and after a section, with and without the right to raise it. Each
// case runs in a thread (a policy is a thread's) or a forked child (one that
// gives its capabilities up), so the test process keeps its own.
#include <gtest/gtest.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <stddef.h>
#include <sys/capability.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <thread>

#include "base/urgent.h"

namespace trainit {
namespace {

struct UrgentSeen {
  bool ahead = false;
  int inside = -1;  // sched_getscheduler(0) in the section
  int priority = -1;
  int after = -1;  // and once it ended
  int nice_after = 99;
};

// A section in a fresh thread whose policy is `policy` and nice `nice`
// before it.
UrgentSeen section_in_a_thread(int policy, int nice) {
  UrgentSeen seen;
  std::thread([&] {
    const sched_param none{.sched_priority = 0};
    if (::sched_setscheduler(0, policy, &none) != 0 || ::setpriority(PRIO_PROCESS, 0, nice) != 0) {
      return;
    }
    {
      const UrgentSection urgent;
      seen.ahead = urgent.ahead();
      seen.inside = ::sched_getscheduler(0);
      sched_param param{};
      (void)::sched_getparam(0, &param);
      seen.priority = param.sched_priority;
    }
    seen.after = ::sched_getscheduler(0);
    seen.nice_after = ::getpriority(PRIO_PROCESS, 0);
  }).join();
  return seen;
}

bool may_raise() {
  cap_t caps = ::cap_get_proc();
  cap_flag_value_t nice = CAP_CLEAR;
  (void)::cap_get_flag(caps, CAP_SYS_NICE, CAP_EFFECTIVE, &nice);
  ::cap_free(caps);
  return nice == CAP_SET;
}

TEST(UrgentSection, RunsTheThreadAheadOfTheFairClassThenGivesItsPolicyAndNiceBack) {
  if (!may_raise()) {
    GTEST_SKIP() << "needs CAP_SYS_NICE (root), as trainit's fan-outs do";
  }
  const UrgentSeen seen = section_in_a_thread(SCHED_OTHER, 3);
  EXPECT_TRUE(seen.ahead);
  EXPECT_EQ(seen.inside, SCHED_FIFO | SCHED_RESET_ON_FORK);
  EXPECT_EQ(seen.priority, 1);  // the lowest: a real-time task of the machine's still comes first
  EXPECT_EQ(seen.after, SCHED_OTHER);
  EXPECT_EQ(seen.nice_after, 3);
}

TEST(UrgentSection, LeavesAThreadOfAnotherPolicyAsItWas) {
  for (const int policy : {SCHED_BATCH, SCHED_IDLE}) {
    const UrgentSeen seen = section_in_a_thread(policy, 0);
    EXPECT_FALSE(seen.ahead) << policy;
    EXPECT_EQ(seen.inside, policy);
    EXPECT_EQ(seen.after, policy);
  }
}

TEST(UrgentSection, AnInnerSectionKeepsTheOutersPolicyAndLeavesItInPlace) {
  if (!may_raise()) {
    GTEST_SKIP() << "needs CAP_SYS_NICE (root), as trainit's fan-outs do";
  }
  bool inner_ahead = false;
  int after_inner = -1;
  int after_outer = -1;
  std::thread([&] {
    {
      const UrgentSection outer;
      {
        const UrgentSection inner;
        inner_ahead = inner.ahead();
      }
      after_inner = ::sched_getscheduler(0);
    }
    after_outer = ::sched_getscheduler(0);
  }).join();
  EXPECT_TRUE(inner_ahead);
  EXPECT_EQ(after_inner, SCHED_FIFO | SCHED_RESET_ON_FORK);  // the outer section still runs
  EXPECT_EQ(after_outer, SCHED_OTHER);
}

// In a child that gives CAP_SYS_NICE up (and keeps RLIMIT_RTPRIO at 0): 0
// when what `check` saw was right.
int in_a_child_without_cap_sys_nice(int (*check)()) {
  const pid_t pid = ::fork();
  if (pid == 0) {
    cap_t caps = ::cap_get_proc();
    const cap_value_t nice = CAP_SYS_NICE;
    const rlimit none{.rlim_cur = 0, .rlim_max = 0};
    if (caps == nullptr || ::cap_set_flag(caps, CAP_EFFECTIVE, 1, &nice, CAP_CLEAR) != 0 ||
        ::cap_set_flag(caps, CAP_PERMITTED, 1, &nice, CAP_CLEAR) != 0 || ::setrlimit(RLIMIT_RTPRIO, &none) != 0 ||
        ::cap_set_proc(caps) != 0) {
      ::_exit(90);
    }
    ::_exit(check());
  }
  int status = 0;
  if (pid < 0 || ::waitpid(pid, &status, 0) != pid || !WIFEXITED(status)) {
    return -1;
  }
  return WEXITSTATUS(status);
}

TEST(UrgentSection, WithoutTheRightToRaiseItNothingChangesAndNothingFails) {
  const int result = in_a_child_without_cap_sys_nice([] {
    const UrgentSection urgent;
    if (urgent.ahead()) {
      return 1;
    }
    return ::sched_getscheduler(0) == SCHED_OTHER ? 0 : 2;
  });
  EXPECT_EQ(result, 0);
}

// Once the thread's policy was read ahead (prepare()), a section's first
// system call is the one that raises it: between a thread's deciding that
// its work is urgent and the raise, any system call is a point where the
// fair class may take the CPU from it (host 0's go once waited 0.39 s
// there, at 1,024 simulated hosts on 2 cores). Shown with a seccomp filter
// that fails sched_getscheduler() from then on, in a child: the section
// must still raise the thread, and put it back afterwards.
TEST(UrgentSection, OncePreparedASectionRaisesTheThreadWithoutReadingItsPolicyFirst) {
  if (!may_raise()) {
    GTEST_SKIP() << "needs CAP_SYS_NICE (root), as trainit's fan-outs do";
  }
  const pid_t pid = ::fork();
  if (pid == 0) {
    UrgentSection::prepare();
    sock_filter filter[] = {
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, nr)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_sched_getscheduler, 0, 1),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EPERM),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
    };
    const sock_fprog program{.len = sizeof(filter) / sizeof(filter[0]), .filter = filter};
    if (::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 || ::prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &program) != 0) {
      ::_exit(90);
    }
    if (::sched_getscheduler(0) != -1) {
      ::_exit(91);  // the filter is not in place
    }
    bool ahead = false;
    sched_param param{};
    {
      const UrgentSection urgent;
      ahead = urgent.ahead();
      (void)::sched_getparam(0, &param);
    }
    sched_param after{};
    (void)::sched_getparam(0, &after);
    ::_exit(!ahead ? 1 : param.sched_priority != 1 ? 2 : after.sched_priority != 0 ? 3 : 0);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status));
  if (WEXITSTATUS(status) == 90) {
    // qemu-user (the aarch64 build's tests) refuses guest seccomp filters.
    GTEST_SKIP() << "no seccomp filter can be installed here";
  }
  EXPECT_EQ(WEXITSTATUS(status), 0)
      << "1: not ahead, 2: not at priority 1, 3: not put back; 91: the filter let the call through";
}

}  // namespace
}  // namespace trainit
