#include <sys/epoll.h>

#include <algorithm>
#include <cerrno>
#include <utility>

#include "base/exit_code.h"
#include "base/log.h"
#include "net/connection.h"
#include "net/control.h"
#include "net/control_common.h"
#include "net/socket.h"

namespace trainit {

using net::emit;
using wire::Type;

namespace {

using std::chrono::milliseconds;

// Hosts start within milliseconds of each other, and host 0 is usually a few
// milliseconds from listening when the first client tries: a refused connect
// costs a SYN and a RST, so the first retries come soon (doubling from here).
constexpr Duration kFirstRetry = milliseconds(10);
constexpr Duration kMaxRetry = milliseconds(500);
constexpr Duration kRefusedRetry = std::chrono::seconds(2);

}  // namespace

ControlClient::ControlClient(Loop& loop, in_addr server, uint16_t port, ControlConfig config, ControlEvents events)
    : loop_(loop),
      server_(server),
      port_(port),
      config_(std::move(config)),
      events_(std::move(events)),
      heartbeat_(net::heartbeat_interval(config_)),
      endpoint_(fmt::format("{}:{}", ipv4_string(server), port)),
      delay_(kFirstRetry) {
  if (config_.instance == 0) {
    config_.instance = net::new_instance();
  }
}

ControlClient::~ControlClient() = default;

Result<std::unique_ptr<ControlClient>> ControlClient::connect(Loop& loop, in_addr server, uint16_t port,
                                                              ControlConfig config, ControlEvents events) {
  if (config.host_index == 0 || config.host_index >= config.host_count ||
      !net::text_problem("job id", config.job_id, net::kMaxJobId).empty()) {
    return Error{fmt::format("control client: host {} of {} with a job id of {} bytes is not a client of a job",
                             config.host_index, config.host_count, config.job_id.size()),
                 0, exit_code::kConfig};
  }
  std::unique_ptr<ControlClient> client(new ControlClient(loop, server, port, std::move(config), std::move(events)));
  if (!client->config_.secret.empty()) {
    auto auth = net::Auth::from_secret(client->config_.secret);
    if (!auth) {
      return auth.error();
    }
    client->auth_ = *auth;
  }
  ControlClient* c = client.get();
  // The first attempt from the loop: no callback runs inside connect().
  c->retry_timer_ = loop.add_timer(
      Clock::now(), [c] { return c->attempt(); }, "control client: connect");
  c->tick_ = loop.add_timer(
      Clock::now() + c->heartbeat_, [c] { return c->on_tick(); }, "control client: connection");
  c->beat_timer_ = loop.add_timer(
      net::next_beat(net::beat_interval(c->config_), Duration::zero()), [c] { return c->on_beat(); },
      "control client: heartbeat");
  return client;
}

Duration ControlClient::backoff() {
  const Duration delay = delay_;
  delay_ = std::min<Duration>(delay_ * 2, kMaxRetry);
  return delay;
}

int ControlClient::attempt() {
  attempt_started_ = Clock::now();
  Fd fd;
  const int r = net::start_connect(server_, port_, fd);
  if (r == 0) {
    on_connected(std::move(fd));
  } else if (r == -EINPROGRESS) {
    state_ = State::kConnecting;
    connecting_ = std::move(fd);
    connect_io_ = loop_.add_io(
        connecting_.get(), EPOLLOUT, [this](uint32_t) { return on_connect_io(); }, "control client: connecting");
  } else {
    log_debug("control: connecting to host 0 at {}: {}", endpoint_, errno_string(-r));
    retry(backoff());
  }
  return 0;
}

int ControlClient::on_connect_io() {
  const int r = net::connect_error(connecting_.get());
  connect_io_.reset();
  Fd fd = std::move(connecting_);
  if (r < 0) {
    log_debug("control: connecting to host 0 at {}: {}", endpoint_, errno_string(-r));
    retry(backoff());
  } else {
    on_connected(std::move(fd));
  }
  return 0;
}

void ControlClient::on_connected(Fd fd) {
  state_ = State::kChallenge;
  nonce_ = net::Auth::nonce();  // this connection's, never another's
  conn_ = std::make_unique<net::Connection>(
      loop_, std::move(fd), "control connection to " + endpoint_, wire::kMaxHelloFrame,
      [this](wire::Frame& frame) { on_frame(frame); },
      [this](const std::string& why, bool malformed) {
        if (malformed) {  // a frame no host 0 sends: as any broken rule, 2 s before the next try
          return protocol_error(why);
        }
        log_debug("control: connection to host 0 at {} ended: {}", endpoint_, why);
        if (state_ == State::kReady) {
          on_closed_by_host0();
        }
        retry(backoff());
      });
}

// Host 0 closed the connection (its process died, its container was
// killed) while the job runs: it has the reconnect grace to take this host
// back. Once the job is ending, host 0 leaving is no loss: peer_loss only.
void ControlClient::on_closed_by_host0() {
  if (stopped_ || released_ || lost_) {
    return;
  }
  const Clock::time_point now = Clock::now();
  closed_ = now;
  const Clock::time_point deadline = now + net::reconnect_grace(config_);
  if (!grace_timer_) {
    grace_timer_ = loop_.add_timer(
        deadline, [this] { return on_grace(); }, "control client: reconnect grace");
  } else {
    grace_timer_.set_deadline(deadline);
  }
}

int ControlClient::on_grace() {
  if (!closed_ || lost_ || state_ == State::kReady || stopped_ || released_) {
    return 0;
  }
  const Duration grace = net::reconnect_grace(config_);
  lost_ = true;
  log_debug("control: host 0 at {} closed the connection {} ms ago; no new one within the grace", endpoint_,
            std::chrono::duration_cast<milliseconds>(Clock::now() - *closed_).count());
  closed_.reset();
  emit(alive_, events_.on_lost, 0U, net::closed_for(grace));
  return 0;
}

void ControlClient::retry(Duration delay) {
  if (state_ == State::kReady) {
    last_heard_ = Clock::now();  // closed: host 0 has peer_loss to come back
  }
  state_ = State::kWaiting;
  connect_io_.reset();
  connecting_.reset();
  conn_.reset();
  // Nothing of this connection's handshake may serve the next one.
  nonce_ = {};
  server_nonce_ = {};
  retry_timer_.set_deadline(Clock::now() + delay);
}

void ControlClient::warn(const std::string& line) {
  if (line != last_warning_) {
    log_warning("{}", line);
    last_warning_ = line;
  }
}

void ControlClient::protocol_error(const std::string& why) {
  warn(fmt::format("control: closed the connection to host 0 at {}: {}", endpoint_, why));
  retry(kRefusedRetry);
}

void ControlClient::on_frame(wire::Frame& frame) {
  switch (state_) {
    case State::kChallenge:
      if (frame.type != Type::kChallenge) {
        return protocol_error(fmt::format("{} before CHALLENGE", wire::type_name(frame.type)));
      }
      return on_challenge(frame.payload);
    case State::kWelcome:
      if (frame.type == Type::kRefuse) {
        warn(fmt::format("control: host 0 at {} refused this host: {}", endpoint_, net::printable(frame.payload)));
        return retry(kRefusedRetry);
      }
      if (frame.type != Type::kWelcome) {
        return protocol_error(fmt::format("{} before WELCOME", wire::type_name(frame.type)));
      }
      return on_welcome(frame.payload);
    case State::kReady:
      return on_ready_frame(frame);
    default:
      return;
  }
}

// The handshake of this connection, as this host sees it.
net::Handshake ControlClient::handshake() const {
  return net::Handshake{server_nonce_,    nonce_,           config_.host_index, config_.host_count,
                        server_instance_, config_.instance, config_.job_id};
}

void ControlClient::on_challenge(const std::string& payload) {
  // Without a nonce of its own in the CHALLENGE, host 0's proof could be one
  // recorded from any earlier connection: refused, secret or not.
  if (std::string why; !net::decode_challenge(payload, server_nonce_, server_instance_, why)) {
    return protocol_error(why);
  }
  wire::PayloadWriter hello;
  hello.u32(config_.host_index).u32(config_.host_count).u64(config_.instance).u8(auth_ ? 1 : 0);
  if (auth_) {
    hello.bytes(net::view(auth_->client_tag(handshake()))).bytes(net::view(nonce_));
  }
  // Without both secrets host 0 refuses, and says why.
  hello.bytes(config_.job_id);
  state_ = State::kWelcome;
  conn_->send(Type::kHello, hello.data());
}

void ControlClient::on_welcome(const std::string& payload) {
  if (auth_ ? !auth_->server_tag_ok(payload, handshake()) : !payload.empty()) {
    return protocol_error("host 0 does not hold this host's secret (its WELCOME is no proof for this connection)");
  }
  state_ = State::kReady;
  joined_ = true;
  closed_.reset();  // back within the grace
  last_heard_ = Clock::now();
  delay_ = kFirstRetry;
  last_warning_.clear();
  conn_->set_max_payload(wire::kMaxFrame);
  log_debug("control: connected to host 0 at {}", endpoint_);
  // Another trainit at host 0 once ranks may have started: the one this
  // host met there died, and its ranks with it. This host neither checks
  // in with it nor starts again: it is lost, and the stop that follows
  // reaches the new one over this connection.
  const bool anew = joined_instance_ != 0 && server_instance_ != joined_instance_;
  joined_instance_ = server_instance_;
  if (anew && went_) {
    if (own_stop_ && !stopped_) {
      conn_->send(Type::kStop, net::encode_stop(*own_stop_));
    }
    if (!lost_ && !stopped_ && !released_) {
      lost_ = true;
      log_debug("control: host 0 at {} is another trainit after the barrier", endpoint_);
      emit(alive_, events_.on_lost, 0U,
           std::string("its trainit started anew after the ranks started: the one before it died"));
    }
    return;
  }
  if (own_restart_) {  // before the check-in of the generation it asks for
    conn_->send(Type::kRestart, net::encode_restart(generation_, *own_restart_));
  }
  if (checked_in_) {
    conn_->send(Type::kCheckIn, net::encode_generation(generation_));
  }
  if (finished_) {
    conn_->send(Type::kFinished, net::encode_generation(generation_));
  }
  if (own_stop_ && !stopped_) {
    conn_->send(Type::kStop, net::encode_stop(*own_stop_));
  }
}

void ControlClient::on_ready_frame(wire::Frame& frame) {
  last_heard_ = Clock::now();
  switch (frame.type) {
    case Type::kHeartbeat: {
      std::string why;
      if (!net::decode_empty(frame.type, frame.payload, why)) {
        return protocol_error(why);
      }
      return;
    }
    case Type::kGo: {
      uint32_t generation = 0;
      std::string why;
      if (!net::decode_generation(frame.type, frame.payload, generation, why)) {
        return protocol_error(why);
      }
      if (!go_ && generation == generation_) {
        go_ = true;
        went_ = true;
        emit(alive_, events_.on_go);
      }
      return;
    }
    case Type::kRestart: {
      uint32_t generation = 0;
      StopNotice notice;
      std::string why;
      if (!net::decode_restart(frame.payload, config_.host_count, -1, generation, notice, why)) {
        return protocol_error(why);
      }
      if (generation < generation_ || (generation == generation_ && !own_restart_)) {
        return;  // known already
      }
      const bool ours = generation == generation_;  // host 0 began the generation this host asked for
      own_restart_.reset();
      if (!ours) {
        generation_ = generation;
        checked_in_ = false;
        go_ = false;
        finished_ = false;
        emit(alive_, events_.on_restart, static_cast<unsigned>(generation), notice);
      }
      return;
    }
    case Type::kStop: {
      StopNotice notice;
      std::string why;
      if (!net::decode_stop(frame.payload, config_.host_count, -1, notice, why)) {
        return protocol_error(why);
      }
      if (!stopped_) {
        stopped_ = true;
        emit(alive_, events_.on_stop, notice);
      }
      return;
    }
    case Type::kRelease: {
      int code = 0;
      std::string why;
      if (!net::decode_release(frame.payload, code, why)) {
        return protocol_error(why);
      }
      if (!released_) {
        released_ = true;
        emit(alive_, events_.on_release, code);
      }
      return;
    }
    default:
      return protocol_error(fmt::format("unexpected {}", wire::type_name(frame.type)));
  }
}

int ControlClient::on_tick() {
  const Clock::time_point now = Clock::now();
  tick_.set_deadline(now + heartbeat_);
  if (state_ != State::kReady && state_ != State::kWaiting && now - attempt_started_ > config_.handshake) {
    log_debug("control: no answer from host 0 at {} within {} ms", endpoint_,
              std::chrono::duration_cast<milliseconds>(config_.handshake).count());
    retry(backoff());
  }
  if (state_ == State::kReady && conn_->has_unread()) {
    last_heard_ = now;  // host 0's frames wait for this side to read them
  }
  if (joined_ && !lost_ && now - last_heard_ > config_.peer_loss) {
    lost_ = true;
    log_debug("control: nothing heard from host 0 at {} for {} ms", endpoint_,
              std::chrono::duration_cast<milliseconds>(now - last_heard_).count());
    if (state_ == State::kReady) {
      retry(backoff());  // that connection is dead; a new one may still come
    }
    emit(alive_, events_.on_lost, 0U, net::silent_for(config_.peer_loss));
  }
  return 0;
}

int ControlClient::on_beat() {
  beat_timer_.set_deadline(net::next_beat(net::beat_interval(config_), Duration::zero()));
  if (state_ == State::kReady) {
    conn_->send(Type::kHeartbeat);
  }
  return 0;
}

void ControlClient::check_in() {
  checked_in_ = true;
  if (state_ == State::kReady) {
    conn_->send(Type::kCheckIn, net::encode_generation(generation_));
  }
}

// This host's own failure as host 0 will check it: for this host, with its
// exit code and cause sendable.
StopNotice ControlClient::own_notice(const StopNotice& notice) const {
  StopNotice sent = net::sendable(notice);
  sent.host = static_cast<int>(config_.host_index);
  return sent;
}

unsigned ControlClient::restart(const StopNotice& notice) {
  if (stopped_ || own_stop_) {
    return 0;
  }
  ++generation_;
  own_restart_ = own_notice(notice);
  checked_in_ = false;
  go_ = false;
  finished_ = false;
  if (state_ == State::kReady) {
    conn_->send(Type::kRestart, net::encode_restart(generation_, *own_restart_));
  }
  return generation_;
}

void ControlClient::finish() {
  finished_ = true;
  if (state_ == State::kReady) {
    conn_->send(Type::kFinished, net::encode_generation(generation_));
  }
}

bool ControlClient::stop(const StopNotice& notice) {
  if (stopped_ || own_stop_) {
    return false;
  }
  own_stop_ = own_notice(notice);
  if (state_ == State::kReady) {
    conn_->send(Type::kStop, net::encode_stop(*own_stop_));
  }
  return true;
}

void ControlClient::when_sent(std::function<void()> sent) {
  sent_ = std::move(sent);
  check_sent();
}

void ControlClient::check_sent() {
  if (!sent_) {
    return;
  }
  if (state_ == State::kReady && conn_ && conn_->sending()) {
    conn_->when_sent([this] { check_sent(); });
    return;
  }
  std::exchange(sent_, nullptr)();
}

}  // namespace trainit
