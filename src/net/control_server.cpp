#include <sys/epoll.h>

#include <algorithm>
#include <cerrno>
#include <utility>

#include "base/exit_code.h"
#include "base/log.h"
#include "base/urgent.h"
#include "net/connection.h"
#include "net/control.h"
#include "net/control_common.h"
#include "net/peer_warnings.h"
#include "net/socket.h"

namespace trainit {

using net::emit;
using wire::Type;

// One accepted connection; a host's once its HELLO was taken.
struct ControlServer::Link {
  std::unique_ptr<net::Connection> conn;
  in_addr address{};  // the address it came from
  std::string peer;   // the same, in words
  Clock::time_point opened;
  int host = -1;       // -1 until the handshake is done
  net::Nonce nonce{};  // the challenge sent: fresh for this connection
};

namespace {

std::string as_host(int host) {
  return host > 0 ? fmt::format(" (host {})", host) : std::string();
}

// Host 0's own notice, as the clients will check it: its exit code and
// cause sendable, its failing host one of the job's (host 0's, when not).
StopNotice own_notice(const StopNotice& notice, unsigned host_count) {
  StopNotice sent = net::sendable(notice);
  if (sent.host < 0 || static_cast<unsigned>(sent.host) >= host_count) {
    sent.host = 0;
  }
  return sent;
}

}  // namespace

ControlServer::ControlServer(Loop& loop, ControlConfig config, ControlEvents events)
    : loop_(loop),
      config_(std::move(config)),
      events_(std::move(events)),
      heartbeat_(net::heartbeat_interval(config_)),
      hosts_(config_.host_count),
      warnings_(std::make_unique<net::PeerWarnings>(kWarningInterval, kWarnedAddresses)) {
  // The fan-outs' sections (fan_out) raise the loop's thread with their
  // first system call: its policy is read now, not after a go is decided.
  UrgentSection::prepare();
  if (config_.instance == 0) {
    config_.instance = net::new_instance();
  }
}

ControlServer::~ControlServer() = default;

Result<std::unique_ptr<ControlServer>> ControlServer::listen(Loop& loop, uint16_t port, std::vector<in_addr> allowed,
                                                             ControlConfig config, ControlEvents events) {
  if (config.host_index != 0 || config.host_count < 1 ||
      !net::text_problem("job id", config.job_id, net::kMaxJobId).empty()) {
    return Error{fmt::format("control server: host {} of {} with a job id of {} bytes is not host 0 of a job",
                             config.host_index, config.host_count, config.job_id.size()),
                 0, exit_code::kConfig};
  }
  std::unique_ptr<ControlServer> server(new ControlServer(loop, std::move(config), std::move(events)));
  if (!server->config_.secret.empty()) {
    auto auth = net::Auth::from_secret(server->config_.secret);
    if (!auth) {
      return auth.error();
    }
    server->auth_ = *auth;
  }
  int r = net::listen_tcp(port, server->listen_fd_);
  if (r >= 0) {
    r = net::local_port(server->listen_fd_.get());
  }
  if (r < 0) {
    return Error{fmt::format("control server: cannot listen on port {}: {}", port, errno_string(-r)), -r,
                 exit_code::kOsError};
  }
  server->port_ = static_cast<uint16_t>(r);
  server->allowed_ = std::move(allowed);
  ControlServer* s = server.get();
  s->accept_io_ = loop.add_io(
      s->listen_fd_.get(), EPOLLIN, [s](uint32_t) { return s->on_accept(); }, "control server: accept");
  s->tick_ = loop.add_timer(
      Clock::now() + s->heartbeat_, [s] { return s->on_tick(); }, "control server: connections");
  const Duration beat = net::beat_interval(s->config_);
  s->beat_timer_ = loop.add_timer(
      net::next_beat(beat, beat / 2), [s] { return s->on_beat(); }, "control server: heartbeat");
  return server;
}

bool ControlServer::allowed(in_addr addr) const noexcept {
  return allowed_.empty() ||
         std::any_of(allowed_.begin(), allowed_.end(), [addr](in_addr a) { return same_ipv4(a, addr); });
}

Duration ControlServer::hello_deadline() const noexcept {
  return std::min<Duration>(config_.handshake, kHelloDeadline);
}

// A new connection never waits for a slot, nor is it refused for want of
// one: whoever holds the slots (silent strangers, half-open connections)
// would keep the job's own hosts out for as long as they liked. The oldest
// gives way instead, and the one chosen is of the address with the most
// connections waiting, so that a host connecting from an address of its own
// loses its slot only when every slot is held by a different address.
void ControlServer::make_room(in_addr peer) {
  // The usual case in one pass without allocating (1,023 hosts connecting
  // at once make as many calls): its own address's count, and the total.
  size_t pending = 0;
  size_t own = 0;
  Link* own_oldest = nullptr;
  for (const auto& link : links_) {  // oldest first
    if (link->host >= 0) {
      continue;
    }
    ++pending;
    if (same_ipv4(link->address, peer) && own++ == 0) {
      own_oldest = link.get();
    }
  }
  if (own >= kMaxPendingPerAddress) {
    return close_link(own_oldest, "closed",
                      fmt::format("a newer connection from that address took its slot ({} at most per address "
                                  "before their HELLO)",
                                  kMaxPendingPerAddress));
  }
  if (pending < max_pending()) {
    return;
  }
  evict_from_the_most();
}

size_t ControlServer::max_pending() const noexcept {
  return std::max<size_t>(kMaxPending, config_.host_count);
}

// Every slot is taken: the oldest connection of the address holding the
// most gives way.
void ControlServer::evict_from_the_most() {
  struct Address {
    in_addr address;
    size_t pending;
    Link* oldest;
  };
  std::vector<Address> addresses;
  for (const auto& link : links_) {  // oldest first
    if (link->host >= 0) {
      continue;
    }
    auto it = std::find_if(addresses.begin(), addresses.end(),
                           [&](const Address& a) { return same_ipv4(a.address, link->address); });
    if (it == addresses.end()) {
      addresses.push_back({link->address, 1, link.get()});
    } else {
      ++it->pending;
    }
  }
  // The first of the most: the oldest among ties, as `addresses` is in the
  // order of each address's oldest connection.
  const auto most = std::max_element(addresses.begin(), addresses.end(),
                                     [](const Address& a, const Address& b) { return a.pending < b.pending; });
  close_link(most->oldest, "closed",
             fmt::format("a newer connection took its slot ({} at most before their HELLO, {} of them from that "
                         "address)",
                         max_pending(), most->pending));
}

int ControlServer::on_accept() {
  // A bounded number per wake-up; the source is level-triggered.
  for (int taken = 0; taken < 64; ++taken) {
    Fd fd;
    in_addr peer{};
    const int r = net::accept_tcp(listen_fd_.get(), fd, peer);
    if (r == -EAGAIN) {
      return 0;
    }
    if (r == -EMFILE || r == -ENFILE || r == -ENOBUFS || r == -ENOMEM) {
      // The socket stays ready while the connection waits: pause until the
      // next heartbeat rather than spin.
      log_warning("control: cannot accept connections: {}; pausing", errno_string(-r));
      accept_io_.set_enabled(false);
      return 0;
    }
    if (r < 0) {
      continue;  // that connection failed (ECONNABORTED, a firewall's EPERM)
    }
    const std::string address = ipv4_string(peer);
    if (!allowed(peer)) {
      static constexpr std::string_view kWhy = "not one of the job's hosts";
      warnings_->warn(peer, fmt::format("control: refused a connection from {}: {}", address, kWhy), "refused", kWhy,
                      Clock::now());
      continue;
    }
    make_room(peer);
    auto owned = std::make_unique<Link>();
    Link* link = owned.get();
    link->address = peer;
    link->peer = address;
    link->opened = Clock::now();
    link->nonce = net::Auth::nonce();
    link->conn = std::make_unique<net::Connection>(
        loop_, std::move(fd), "control connection from " + address, wire::kMaxHelloFrame,
        [this, link](wire::Frame& frame) { on_frame(link, frame); },
        [this, link](const std::string& why, bool malformed) {
          if (malformed) {
            return close_link(link, "closed", why);  // drops it
          }
          log_debug("control: connection from {}{} ended: {}", link->peer, as_host(link->host), why);
          on_closed_by_peer(link);
          drop(link);
        });
    links_.push_back(std::move(owned));
    link->conn->send(Type::kChallenge, net::encode_challenge(link->nonce, config_.instance));
  }
  return 0;
}

void ControlServer::drop(Link* link) {
  if (link->host > 0) {
    Host& host = hosts_[static_cast<size_t>(link->host)];
    if (host.link == link) {
      host.link = nullptr;
      host.last_heard = Clock::now();  // closed: it has peer_loss to come back
    }
  }
  std::erase_if(links_, [link](const auto& l) { return l.get() == link; });
}

void ControlServer::refuse(Link* link, const std::string& why) {
  link->conn->send(Type::kRefuse, why);
  close_link(link, "refused", why);
}

void ControlServer::close_link(Link* link, std::string_view verb, const std::string& why) {
  warnings_->warn(link->address,
                  fmt::format("control: {} the connection from {}{}: {}", verb, link->peer, as_host(link->host), why),
                  verb, why, Clock::now());
  drop(link);
}

void ControlServer::on_frame(Link* link, wire::Frame& frame) {
  if (link->host < 0) {
    if (frame.type == Type::kHello) {
      on_hello(link, frame.payload);
    } else {
      close_link(link, "closed", fmt::format("{} before HELLO", wire::type_name(frame.type)));
    }
    return;
  }
  hosts_[static_cast<size_t>(link->host)].last_heard = Clock::now();
  switch (frame.type) {
    case Type::kHeartbeat: {
      std::string why;
      if (!net::decode_empty(frame.type, frame.payload, why)) {
        close_link(link, "closed", why);
      }
      return;
    }
    case Type::kCheckIn:
      on_check_in(link, frame.payload);
      return;
    case Type::kFinished:
      on_finished(link, frame.payload);
      return;
    case Type::kStop:
      on_stop(link, frame.payload);
      return;
    case Type::kRestart:
      on_restart(link, frame.payload);
      return;
    default:
      close_link(link, "closed", fmt::format("unexpected {}", wire::type_name(frame.type)));
  }
}

void ControlServer::on_hello(Link* link, const std::string& payload) {
  net::HelloMessage hello;
  if (std::string why; !net::decode_hello(payload, hello, why)) {
    return close_link(link, "closed", why);
  }
  const uint32_t index = hello.index;
  const uint32_t count = hello.count;
  const std::string_view job_id = hello.job_id;
  const std::string_view tag = hello.tag;
  const std::string_view nonce = hello.nonce;
  const uint8_t has_secret = hello.has_secret ? 1 : 0;
  net::Handshake handshake{link->nonce, {}, index, count, config_.instance, hello.instance, job_id};
  std::copy(nonce.begin(), nonce.end(), handshake.client_nonce.begin());
  if (auth_ && has_secret == 0) {
    return refuse(link, fmt::format("host {} has no secret; this job has one", index));
  }
  if (!auth_ && has_secret == 1) {
    return refuse(link, fmt::format("host {} has a secret; host 0 has none", index));
  }
  if (auth_ && !auth_->client_tag_ok(tag, handshake)) {
    return refuse(link, fmt::format("host {} has another secret, or its proof is not of this connection", index));
  }
  if (job_id != config_.job_id) {
    return refuse(link, fmt::format("host {} is of job '{}', not '{}'", index, net::printable(job_id), config_.job_id));
  }
  if (count != config_.host_count || index == 0 || index >= count) {
    return refuse(
        link, fmt::format("host {} of {} is not a client of this job of {} hosts", index, count, config_.host_count));
  }
  Host& host = hosts_[index];
  if (host.link != nullptr) {
    log_debug("control: host {} connected again from {}; closing its old connection", index, link->peer);
    drop(host.link);
  }
  // Another trainit of that host: the one before it died, and its ranks
  // with it once the barrier let them start. Before, the new one takes its
  // place and checks in anew.
  const bool anew = host.joined && host.instance != hello.instance;
  host.instance = hello.instance;
  if (anew && host.checked_in && !went_) {
    host.checked_in = false;
    --clients_checked_in_;
  }
  link->host = static_cast<int>(index);
  link->conn->set_max_payload(wire::kMaxFrame);
  host.link = link;
  host.joined = true;
  host.closed.reset();  // back within its grace
  host.last_heard = Clock::now();
  log_debug("control: host {} connected from {}", index, link->peer);
  link->conn->send(Type::kWelcome, auth_ ? net::view(auth_->server_tag(handshake)) : std::string());
  // What happened before it (re)connected.
  if (restart_) {
    link->conn->send(Type::kRestart, net::encode_restart(generation_, *restart_));
  }
  if (stop_) {
    link->conn->send(Type::kStop, net::encode_stop(*stop_));
  }
  if (release_) {
    link->conn->send(Type::kRelease, net::encode_release(*release_));
  }
  if (anew && went_ && !stop_ && !release_ && !host.lost) {
    log_debug("control: host {} came back as another trainit after the barrier", index);
    (void)lose_keeping_link(index, "its trainit started anew after the ranks started: the one before it died");
  }
}

void ControlServer::on_check_in(Link* link, const std::string& payload) {
  const auto index = static_cast<unsigned>(link->host);
  uint32_t generation = 0;
  std::string why;
  if (!net::decode_generation(Type::kCheckIn, payload, generation, why)) {
    return close_link(link, "closed", why);
  }
  if (generation != generation_) {
    log_debug("control: host {} checked in for generation {}; this is {}: ignored", index, generation, generation_);
    return;
  }
  Host& host = hosts_[index];
  if (!host.checked_in) {
    host.checked_in = true;
    ++clients_checked_in_;
    log_debug("control: host {} checked in", index);
    if (!emit(alive_, events_.on_checked_in, index)) {
      return;
    }
  }
  if (go_ && !stop_) {
    link->conn->send(Type::kGo, net::encode_generation(generation_));  // it reconnected after the barrier
  }
  maybe_go();
}

void ControlServer::on_finished(Link* link, const std::string& payload) {
  const auto index = static_cast<unsigned>(link->host);
  uint32_t generation = 0;
  std::string why;
  if (!net::decode_generation(Type::kFinished, payload, generation, why)) {
    return close_link(link, "closed", why);
  }
  if (generation != generation_) {
    log_debug("control: host {} finished generation {}; this is {}: ignored", index, generation, generation_);
    return;
  }
  Host& host = hosts_[index];
  if (host.finished) {
    return;
  }
  host.finished = true;
  ++clients_finished_;
  log_debug("control: host {} finished", index);
  (void)emit(alive_, events_.on_finished, index);
}

std::vector<unsigned> ControlServer::unfinished() const {
  std::vector<unsigned> hosts;
  for (unsigned i = 1; i < hosts_.size(); ++i) {
    if (!hosts_[i].finished) {
      hosts.push_back(i);
    }
  }
  return hosts;
}

void ControlServer::check_in() {
  checked_in_ = true;
  maybe_go();
}

void ControlServer::maybe_go() {
  if (go_ || stop_ || !checked_in_ || clients_checked_in_ < hosts_.size() - 1) {
    return;
  }
  go_ = true;
  went_ = true;
  fan_out("go", wire::encode(Type::kGo, net::encode_generation(generation_)));
  emit(alive_, events_.on_go);
}

void ControlServer::on_stop(Link* link, const std::string& payload) {
  StopNotice notice;
  std::string why;
  if (!net::decode_stop(payload, config_.host_count, link->host, notice, why)) {
    return close_link(link, "closed", why);
  }
  if (stop_) {
    if (notice.host != stop_->host) {
      log_info("control: host {} stopped too ({}); the first stop stands", link->host, net::describe(notice));
    }
    return;
  }
  stop_ = notice;
  // This host stops its own ranks first (a millisecond), then tells the
  // others: each write wakes a host, and on a machine short of CPU the woken
  // hosts run before this one has the CPU back (host 0 stopped last, 1.2 s
  // after the failing host, at 1,024 simulated hosts on 2 cores). The
  // handler never ends this server.
  const std::string frame = wire::encode(Type::kStop, net::encode_stop(notice));  // what was checked
  if (emit(alive_, events_.on_stop, notice)) {
    fan_out("stop", frame, link);
  }
}

void ControlServer::on_restart(Link* link, const std::string& payload) {
  uint32_t generation = 0;
  StopNotice notice;
  std::string why;
  if (!net::decode_restart(payload, config_.host_count, link->host, generation, notice, why)) {
    return close_link(link, "closed", why);
  }
  if (stop_ || generation != generation_ + 1) {
    log_debug("control: host {} asked for generation {} ({}); this is {}{}: ignored", link->host, generation,
              net::describe(notice), generation_, stop_ ? ", stopped" : "");
    return;
  }
  begin_generation(notice, link);
  (void)emit(alive_, events_.on_restart, generation_, notice);
}

unsigned ControlServer::restart(const StopNotice& notice) {
  if (stop_) {
    log_debug("control: a stop came first ({}); not restarting", net::describe(*stop_));
    return 0;
  }
  begin_generation(own_notice(notice, config_.host_count), nullptr);
  return generation_;
}

// The next generation, everywhere but at `from` (which asked for it): the
// barrier and the finished hosts start over.
void ControlServer::begin_generation(const StopNotice& notice, const Link* from) {
  ++generation_;
  restart_ = notice;
  go_ = false;
  checked_in_ = false;
  for (Host& host : hosts_) {
    host.checked_in = false;
    host.finished = false;
  }
  clients_checked_in_ = 0;
  clients_finished_ = 0;
  fan_out("restart", wire::encode(Type::kRestart, net::encode_restart(generation_, notice)), from);
}

bool ControlServer::stop(const StopNotice& notice) {
  if (stop_) {
    log_debug("control: a stop came first ({}); not sending this one", net::describe(*stop_));
    return false;
  }
  stop_ = own_notice(notice, config_.host_count);
  fan_out("stop", wire::encode(Type::kStop, net::encode_stop(*stop_)));
  return true;
}

void ControlServer::release(int exit_code) {
  if (release_) {
    return;
  }
  release_ = exit_code;
  fan_out("release", wire::encode(Type::kRelease, net::encode_release(exit_code)));
}

// One frame to every client through its handshake (but `except`): encoded
// once, written to each socket at once without waiting for any (what a
// socket does not take now is queued: a slow host delays no other).
// Returns how many clients it wrote to.
unsigned ControlServer::send_to_clients(const std::string& frame, const Link* except) {
  unsigned sent = 0;
  for (const auto& link : links_) {
    if (link->host > 0 && link.get() != except) {
      link->conn->send_frame(frame);
      ++sent;
    }
  }
  return sent;
}

// A frame every host waits on (go, stop, restart, release), as one urgent
// burst: each write wakes a host, and the woken hosts must not take the CPU
// from the writes still to come (base/urgent.h). Heartbeats, which nobody
// waits on, stay in the fair class.
void ControlServer::fan_out(std::string_view what, const std::string& frame, const Link* except) {
  const Clock::time_point began = Clock::now();
  unsigned sent = 0;
  bool ahead = false;
  Duration took{};
  {
    const UrgentSection urgent;
    ahead = urgent.ahead();
    sent = send_to_clients(frame, except);
    // Read inside the section: once it ends, the hosts the writes woke (in
    // the real-time class while their ranks run) come first, for hundreds
    // of milliseconds at 1,024 simulated hosts on 2 cores.
    took = Clock::now() - began;
  }
  log_debug("control: {} written to {} host{} in {:.1f} ms{}", what, sent, sent == 1 ? "" : "s", seconds(took) * 1e3,
            ahead ? ", ahead of the fair class" : "");
}

void ControlServer::when_sent(std::function<void()> sent) {
  sent_ = std::move(sent);
  check_sent();
}

// The first client still sending says when it is done; then the next is
// looked at, until none is.
void ControlServer::check_sent() {
  if (!sent_) {
    return;
  }
  for (const auto& link : links_) {
    if (link->host > 0 && link->conn->sending()) {
      link->conn->when_sent([this] { check_sent(); });
      return;
    }
  }
  std::exchange(sent_, nullptr)();
}

std::vector<unsigned> ControlServer::missing() const {
  std::vector<unsigned> hosts;
  for (unsigned i = 0; i < hosts_.size(); ++i) {
    if (i == 0 ? !checked_in_ : !hosts_[i].checked_in) {
      hosts.push_back(i);
    }
  }
  return hosts;
}

int ControlServer::on_tick() {
  const Clock::time_point now = Clock::now();
  tick_.set_deadline(now + heartbeat_);
  if (!accept_io_.enabled()) {
    accept_io_.set_enabled(true);
  }
  warnings_->tick(now);
  std::vector<Link*> late;
  for (const auto& link : links_) {
    if (link->host < 0 && now - link->opened > hello_deadline()) {
      late.push_back(link.get());
    }
  }
  for (Link* link : late) {
    close_link(link, "closed",
               fmt::format("no handshake within {} ms",
                           std::chrono::duration_cast<std::chrono::milliseconds>(hello_deadline()).count()));
  }
  for (unsigned i = 1; i < hosts_.size(); ++i) {
    Host& host = hosts_[i];
    if (!host.joined || host.lost || now - host.last_heard <= config_.peer_loss) {
      continue;
    }
    // Its frames may be waiting for this side (a loop held up for seconds,
    // a starved machine): they are read in this same iteration.
    if (host.link != nullptr && host.link->conn->has_unread()) {
      host.last_heard = now;
      continue;
    }
    log_debug("control: nothing heard from host {} for {} ms", i,
              std::chrono::duration_cast<std::chrono::milliseconds>(now - host.last_heard).count());
    if (!lose(i, net::silent_for(config_.peer_loss))) {
      return 0;
    }
  }
  return 0;
}

int ControlServer::on_beat() {
  const Duration beat = net::beat_interval(config_);
  beat_timer_.set_deadline(net::next_beat(beat, beat / 2));
  send_to_clients(heartbeat_frame_);
  return 0;
}

bool ControlServer::lose(unsigned index, const std::string& why) {
  if (Host& host = hosts_[index]; host.link != nullptr) {
    drop(host.link);
  }
  return lose_keeping_link(index, why);
}

// A host lost whose current connection stays: a new trainit of it, which
// is then told of the stop its loss brings.
bool ControlServer::lose_keeping_link(unsigned index, const std::string& why) {
  Host& host = hosts_[index];
  host.lost = true;
  host.closed.reset();
  return emit(alive_, events_.on_lost, index, why);
}

// A host's own connection closed by the host (its process died, its
// container was killed: the kernel closed the socket) while the job runs.
// A live host reconnects at once (100 ms, then a few hundred ms apart);
// one that does not within the grace is gone. Once the job is ending, hosts
// leave: that is no loss, and only peer_loss applies.
void ControlServer::on_closed_by_peer(const Link* link) {
  if (link->host <= 0 || stop_ || release_) {
    return;
  }
  Host& host = hosts_[static_cast<size_t>(link->host)];
  if (host.link != link || host.lost) {
    return;  // an older connection of a host that reconnected already
  }
  const Clock::time_point now = Clock::now();
  host.closed = now;
  const Clock::time_point deadline = now + net::reconnect_grace(config_);
  if (!grace_timer_) {
    grace_timer_ = loop_.add_timer(
        deadline, [this] { return on_grace(); }, "control server: reconnect grace");
  } else if (!grace_timer_.enabled()) {
    grace_timer_.set_deadline(deadline);
  }
  // Else it is armed for an earlier close: on_grace() re-arms it for this one.
}

int ControlServer::on_grace() {
  const Clock::time_point now = Clock::now();
  const Duration grace = net::reconnect_grace(config_);
  std::optional<Clock::time_point> next;
  for (unsigned i = 1; i < hosts_.size(); ++i) {
    const Host& host = hosts_[i];
    if (!host.closed || host.lost || stop_ || release_) {
      continue;
    }
    if (now - *host.closed < grace) {
      next = std::min(next.value_or(Clock::time_point::max()), *host.closed + grace);
      continue;
    }
    log_debug("control: host {} closed its connection {} ms ago and has not reconnected", i,
              std::chrono::duration_cast<std::chrono::milliseconds>(now - *host.closed).count());
    if (!lose(i, net::closed_for(grace))) {
      return 0;
    }
  }
  if (next) {
    grace_timer_.set_deadline(*next);
  } else {
    grace_timer_.set_enabled(false);
  }
  return 0;
}

}  // namespace trainit
