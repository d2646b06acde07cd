#include "net/resolver.h"

#include <arpa/inet.h>
#include <arpa/nameser.h>
#include <fcntl.h>
#include <resolv.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <system_error>
#include <thread>

#include "base/log.h"

namespace trainit {

// What the loop and one worker share; the worker's copy keeps it alive after
// the Resolver is gone.
struct Resolver::Round {
  std::vector<size_t> index;  // into names_
  std::vector<std::string> names;
  std::vector<std::vector<in_addr>> addrs;  // written by the worker, read after `finished`
  std::shared_ptr<const LookupFn> lookup;
  Fd done;  // eventfd, written once by the worker at the end
  std::atomic<bool> finished{false};
  std::atomic<bool> cancelled{false};
};

namespace {

bool same_name(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           const auto lower = [](char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; };
           return lower(x) == lower(y);
         });
}

std::string read_file(const char* path) {
  std::string text;
  Fd fd(::open(path, O_RDONLY | O_CLOEXEC));
  if (!fd) {
    return text;
  }
  char buffer[4096];
  for (;;) {
    const ssize_t n = ::read(fd.get(), buffer, sizeof(buffer));
    if (n < 0 && errno == EINTR) {
      continue;
    }
    if (n <= 0 || text.size() > (16U << 20)) {
      return text;
    }
    text.append(buffer, static_cast<size_t>(n));
  }
}

std::vector<in_addr> dns_lookup(const std::string& name) {
  std::vector<in_addr> addrs;
  struct __res_state state {};
  if (::res_ninit(&state) != 0) {
    return addrs;
  }
  unsigned char answer[4096];
  const int n = ::res_nsearch(&state, name.c_str(), ns_c_in, ns_t_a, answer, sizeof(answer));
  ::res_nclose(&state);
  ns_msg message;
  if (n <= 0 || ::ns_initparse(answer, std::min<int>(n, sizeof(answer)), &message) < 0) {
    return addrs;
  }
  for (int i = 0; i < ns_msg_count(message, ns_s_an); ++i) {
    ns_rr record;
    if (::ns_parserr(&message, ns_s_an, i, &record) == 0 && ns_rr_type(record) == ns_t_a &&
        ns_rr_rdlen(record) == sizeof(in_addr)) {
      in_addr addr;
      std::memcpy(&addr, ns_rr_rdata(record), sizeof(addr));
      addrs.push_back(addr);
    }
  }
  return addrs;
}

}  // namespace

std::vector<in_addr> hosts_file_lookup(std::string_view text, std::string_view name) {
  std::vector<in_addr> addrs;
  constexpr std::string_view kSpace = " \t\r";
  while (!text.empty()) {
    std::string_view line = text.substr(0, text.find('\n'));
    text.remove_prefix(std::min(line.size() + 1, text.size()));
    line = line.substr(0, line.find('#'));
    in_addr addr{};
    bool first = true;
    while (!line.empty()) {
      const size_t start = line.find_first_not_of(kSpace);
      if (start == std::string_view::npos) {
        break;
      }
      line.remove_prefix(start);
      const std::string_view field = line.substr(0, line.find_first_of(kSpace));
      line.remove_prefix(field.size());
      if (first) {
        first = false;
        if (::inet_pton(AF_INET, std::string(field).c_str(), &addr) != 1) {
          break;  // IPv6, or not an address
        }
      } else if (same_name(field, name) &&
                 std::none_of(addrs.begin(), addrs.end(), [&](in_addr a) { return a.s_addr == addr.s_addr; })) {
        addrs.push_back(addr);
      }
    }
  }
  return addrs;
}

std::vector<in_addr> lookup_ipv4(const std::string& name) {
  in_addr addr{};
  if (::inet_aton(name.c_str(), &addr) != 0) {
    return {addr};
  }
  std::vector<in_addr> addrs = hosts_file_lookup(read_file("/etc/hosts"), name);
  return addrs.empty() ? dns_lookup(name) : addrs;
}

Resolver::Resolver(Loop& loop, std::vector<std::string> names, DoneFn done, Backoff backoff)
    : Resolver(loop, std::move(names), std::move(done), lookup_ipv4, backoff) {}

Resolver::Resolver(Loop& loop, std::vector<std::string> names, DoneFn done, LookupFn lookup, Backoff backoff)
    : loop_(loop),
      names_(std::move(names)),
      addrs_(names_.size()),
      done_(std::move(done)),
      lookup_(std::make_shared<const LookupFn>(std::move(lookup))),
      backoff_(backoff),
      delay_(backoff.first) {
  timer_ = loop_.add_timer(
      Clock::time_point::max(),
      [this] {
        start_round();
        return 0;
      },
      "resolver: next round");
  start_round();
}

Resolver::~Resolver() {
  io_.reset();
  timer_.reset();
  if (round_) {
    round_->cancelled.store(true, std::memory_order_relaxed);
  }
}

std::vector<std::string> Resolver::missing() const {
  std::vector<std::string> names;
  for (size_t i = 0; i < names_.size(); ++i) {
    if (addrs_[i].empty()) {
      names.push_back(names_[i]);
    }
  }
  return names;
}

void Resolver::start_round() {
  ++rounds_;
  auto round = std::make_shared<Round>();
  for (size_t i = 0; i < names_.size(); ++i) {
    if (addrs_[i].empty()) {
      round->index.push_back(i);
      round->names.push_back(names_[i]);
    }
  }
  round->addrs.resize(round->names.size());
  round->lookup = lookup_;
  round->done.reset(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  if (!round->done) {
    log_debug("resolver: no eventfd: {}", errno_string(errno));
    return wait_and_retry();
  }
  try {
    std::thread([round] { work(*round); }).detach();
  } catch (const std::system_error& e) {
    log_debug("resolver: no thread: {}", e.what());
    return wait_and_retry();
  }
  round_ = round;
  io_ = loop_.add_io(
      round->done.get(), EPOLLIN, [this](uint32_t) { return on_round_done(); }, "resolver: results");
}

void Resolver::wait_and_retry() {
  timer_.set_deadline(Clock::now() + delay_);
  delay_ = std::min<Duration>(delay_ * 2, backoff_.max);
}

int Resolver::on_round_done() {
  // Pairs with the worker's store: its results are visible from here on (the
  // eventfd is written after it).
  if (!round_->finished.load(std::memory_order_acquire)) {
    return -EPROTO;
  }
  io_.reset();
  const std::shared_ptr<Round> round = std::move(round_);
  for (size_t j = 0; j < round->index.size(); ++j) {
    if (!round->addrs[j].empty()) {
      addrs_[round->index[j]] = std::move(round->addrs[j]);
    }
  }
  if (std::any_of(addrs_.begin(), addrs_.end(), [](const auto& a) { return a.empty(); })) {
    wait_and_retry();
    return 0;
  }
  std::vector<Resolved> resolved;
  for (size_t i = 0; i < names_.size(); ++i) {
    resolved.push_back({names_[i], addrs_[i]});
  }
  const DoneFn done = std::move(done_);  // it may destroy *this
  if (done) {
    done(std::move(resolved));
  }
  return 0;
}

void Resolver::work(Round& round) {
  for (size_t i = 0; i < round.names.size() && !round.cancelled.load(std::memory_order_relaxed); ++i) {
    try {
      round.addrs[i] = (*round.lookup)(round.names[i]);
    } catch (...) {
      round.addrs[i].clear();
    }
  }
  round.finished.store(true, std::memory_order_release);
  const uint64_t one = 1;
  (void)!::write(round.done.get(), &one, sizeof(one));
}

}  // namespace trainit
