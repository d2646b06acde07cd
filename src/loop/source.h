// The loop's sources as the loop keeps them (loop.cpp, children.cpp): not
// part of its interface.
#pragma once

#include <signal.h>
#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <string>

#include "base/fd.h"
#include "loop/loop.h"

namespace trainit {

enum class Kind { kIo, kSignal, kTimer, kChild, kDefer, kExit };

struct Source {
  Kind kind;
  std::string description;
  bool enabled = true;
  bool dead = false;  // released; freed after the current iteration

  int fd = -1;  // io
  uint32_t events = 0;
  bool in_epoll = false;
  Loop::IoFn io_fn;

  sigset_t signals{};  // signal
  Loop::SignalFn signal_fn;

  Clock::time_point deadline = Clock::time_point::max();  // timer
  std::function<int()> plain_fn;                          // timer, defer, exit

  pid_t pid = 0;  // child
  Fd pidfd;
  bool reaped = false;
  Loop::ChildFn child_fn;
};

}  // namespace trainit
