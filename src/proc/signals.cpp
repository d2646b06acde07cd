#include "proc/signals.h"

#include <fmt/core.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "base/number.h"

namespace trainit {
namespace {

struct NamedSignal {
  const char* name;  // without "SIG"
  int signo;
};

constexpr NamedSignal kSignals[] = {
    {"HUP", SIGHUP},   {"INT", SIGINT},       {"QUIT", SIGQUIT}, {"ILL", SIGILL},     {"TRAP", SIGTRAP},
    {"ABRT", SIGABRT}, {"IOT", SIGIOT},       {"BUS", SIGBUS},   {"FPE", SIGFPE},     {"KILL", SIGKILL},
    {"USR1", SIGUSR1}, {"SEGV", SIGSEGV},     {"USR2", SIGUSR2}, {"PIPE", SIGPIPE},   {"ALRM", SIGALRM},
    {"TERM", SIGTERM}, {"STKFLT", SIGSTKFLT}, {"CHLD", SIGCHLD}, {"CONT", SIGCONT},   {"STOP", SIGSTOP},
    {"TSTP", SIGTSTP}, {"TTIN", SIGTTIN},     {"TTOU", SIGTTOU}, {"URG", SIGURG},     {"XCPU", SIGXCPU},
    {"XFSZ", SIGXFSZ}, {"VTALRM", SIGVTALRM}, {"PROF", SIGPROF}, {"WINCH", SIGWINCH}, {"IO", SIGIO},
    {"POLL", SIGPOLL}, {"PWR", SIGPWR},       {"SYS", SIGSYS},
};

bool iequals(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) {
    return false;
  }
  for (size_t i = 0; i < a.size(); ++i) {
    char x = a[i];
    if (x >= 'a' && x <= 'z') {
      x = static_cast<char>(x - 'a' + 'A');
    }
    if (x != b[i]) {
      return false;
    }
  }
  return true;
}

// A number in base/number.h's form up to SIGRTMAX's size, or -1.
int parse_int(std::string_view text) {
  auto value = parse_decimal(text, 0, 1024);
  return value ? static_cast<int>(*value) : -1;
}

// "RTMIN", "RTMIN+3", "RTMAX-1" (already without "SIG").
int parse_realtime(std::string_view name) {
  int base;
  std::string_view rest;
  if (name.size() >= 5 && iequals(name.substr(0, 5), "RTMIN")) {
    base = SIGRTMIN;
    rest = name.substr(5);
  } else if (name.size() >= 5 && iequals(name.substr(0, 5), "RTMAX")) {
    base = SIGRTMAX;
    rest = name.substr(5);
  } else {
    return 0;
  }
  if (rest.empty()) {
    return base;
  }
  int offset = parse_int(rest.substr(1));
  if (offset < 0) {
    return 0;
  }
  int signo = rest[0] == '+' ? base + offset : rest[0] == '-' ? base - offset : 0;
  return signo >= SIGRTMIN && signo <= SIGRTMAX ? signo : 0;
}

}  // namespace

SignalState capture_signal_state() noexcept {
  SignalState state;
  ::pthread_sigmask(SIG_SETMASK, nullptr, &state.mask);
  ::sigaction(SIGTTIN, nullptr, &state.ttin);
  ::sigaction(SIGTTOU, nullptr, &state.ttou);
  ::sigaction(SIGCHLD, nullptr, &state.chld);
  return state;
}

int restore_signal_state(const SignalState& state) noexcept {
  if (::sigaction(SIGTTIN, &state.ttin, nullptr) < 0 || ::sigaction(SIGTTOU, &state.ttou, nullptr) < 0 ||
      ::sigaction(SIGCHLD, &state.chld, nullptr) < 0) {
    return -errno;
  }
  int r = ::pthread_sigmask(SIG_SETMASK, &state.mask, nullptr);
  return -r;
}

bool is_kernel_signal(int signo) noexcept {
  switch (signo) {
    case SIGSEGV:
    case SIGBUS:
    case SIGILL:
    case SIGFPE:
    case SIGTRAP:
    case SIGSYS:
    case SIGABRT:
      return true;
    default:
      return false;
  }
}

sigset_t forwardable_signals() noexcept {
  sigset_t set;
  sigfillset(&set);  // glibc leaves out its two internal real-time signals
  for (int signo : {SIGKILL, SIGSTOP, SIGCHLD, SIGTTIN, SIGTTOU}) {
    sigdelset(&set, signo);
  }
  for (int signo = 1; signo < SIGRTMIN; ++signo) {
    if (is_kernel_signal(signo)) {
      sigdelset(&set, signo);
    }
  }
  return set;
}

int signal_from_name(std::string_view name) noexcept {
  int number = parse_int(name);
  if (number >= 0) {
    return number >= 1 && number <= SIGRTMAX ? number : 0;
  }
  if (name.size() > 3 && iequals(name.substr(0, 3), "SIG")) {
    name.remove_prefix(3);
  }
  for (const auto& s : kSignals) {
    if (iequals(name, s.name)) {
      return s.signo;
    }
  }
  return parse_realtime(name);
}

std::string_view signal_name(int signo) noexcept {
  struct Table {
    char names[65][16] = {};
    Table() noexcept {
      for (int s = 1; s <= 64; ++s) {
        std::string_view name;
        std::string_view prefix = "SIG";
        int offset = -1;
        for (const auto& known : kSignals) {
          if (known.signo == s) {
            name = known.name;
            break;
          }
        }
        if (name.empty() && s >= SIGRTMIN && s <= SIGRTMAX) {
          name = "RTMIN";
          offset = s - SIGRTMIN;
        } else if (name.empty()) {
          prefix = "signal ";
          name = s == 32 ? "32" : "33";  // glibc's own real-time signals
        }
        char* p = names[s];
        p = std::copy(prefix.begin(), prefix.end(), p);
        p = std::copy(name.begin(), name.end(), p);
        if (offset > 0) {
          *p++ = '+';
          if (offset >= 10) {
            *p++ = static_cast<char>('0' + offset / 10);
          }
          *p++ = static_cast<char>('0' + offset % 10);
        }
      }
    }
  };
  static const Table table;
  return signo >= 1 && signo <= 64 ? std::string_view(table.names[signo]) : std::string_view("signal ?");
}

}  // namespace trainit
