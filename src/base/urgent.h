// Work that must not wait behind the tasks it wakes.
//
// Host 0's job-wide stop is 1,023 writes at 1,024 hosts: each wakes a host,
// and on a machine short of CPU every woken task runs before the writer has
// the CPU back (the fair class shares it among the runnable; host 0 wrote
// its 16-22 ms of stops over 1.2 s at 1,024 simulated hosts on 2 cores). An
// UrgentSection runs the calling thread in the real-time class for its
// lifetime, ahead of every fair-class task, where the kernel lets it: a
// burst of writes, or a state whose every wake-up must be taken when it
// comes (job/spawn.cpp). Sections nest: an inner one keeps the outer's.
#pragma once

namespace trainit {

class UrgentSection {
 public:
  // SCHED_FIFO at the lowest priority (1), with SCHED_RESET_ON_FORK, for a
  // thread of the normal policy (SCHED_OTHER) that may (CAP_SYS_NICE, or
  // RLIMIT_RTPRIO, and a real-time budget in its cpu cgroup). A thread of
  // the real-time class already (an outer section, or someone chose it)
  // stays as it is, ahead; one of another policy (batch, idle) or one the
  // kernel refuses runs as it was: nothing fails.
  UrgentSection() noexcept;
  // Back to SCHED_OTHER (and the reset-on-fork flag as it was) where this
  // section raised it: the nice value is the thread's own all along.
  ~UrgentSection();
  UrgentSection(const UrgentSection&) = delete;
  UrgentSection& operator=(const UrgentSection&) = delete;

  // Whether the thread runs ahead of the fair class in this section.
  [[nodiscard]] bool ahead() const noexcept { return ahead_; }

  // Reads the calling thread's policy now, at a quiet moment, so that its
  // sections' first system call is the one that raises it (until then it is
  // read by the first section). From deciding that its work is urgent to
  // the raise, a thread of the fair class can be preempted at any system
  // call: host 0's go once waited 0.39 s at the read, 1,024 simulated hosts
  // on 2 cores. The policy read is the thread's own from then on: trainit
  // sets none but in sections, and one set on it from outside later is put
  // back as it was read, at the next section's end.
  static void prepare() noexcept;

 private:
  int before_ = -1;  // the thread's policy before, flags included
  bool ahead_ = false;
  bool raised_ = false;  // by this section
};

}  // namespace trainit
