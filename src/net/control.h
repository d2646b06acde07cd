// The host-to-host control channel of a multi-host job.
//
// Host 0 runs a ControlServer; hosts 1..H-1 each run a ControlClient that
// connects to it and reconnects whenever the connection drops. Over it:
//
//   barrier   each client check_in()s when its host is ready, host 0 too;
//             once all H have, every host gets on_go (host 0 included).
//             Never after a stop.
//   stop      any host stop()s with its failure; host 0 relays it to every
//             other host and each side's on_stop fires, at most once. The
//             first stop host 0 learns of is the job's (its own stop() or a
//             client's): later ones are logged and dropped, and a client
//             whose own stop lost the race still hears the one that won.
//   finish    a client's finish(): every rank of its host exited 0; host 0's
//             on_finished fires once per host, and unfinished() shrinks.
//             Host 0 then release()s the job once its own ranks are done too.
//   release   host 0's release(code): "host 0's job ended with this code";
//             each client's on_release fires with it, once.
//   liveness  both sides send a heartbeat every peer_loss/4, on one grid of
//             the wall clock for every host (net/control_common.h);
//             a host from which nothing arrived for peer_loss (connection
//             silent, or closed and not back) is lost: on_lost(host, why),
//             once per host (a client's only peer is host 0). A connection
//             the peer closes (or resets) while the job runs is a host gone
//             unless it comes back: it is lost after min(reconnect_grace,
//             peer_loss) without a new handshake, not after peer_loss of
//             silence (a killed container's kernel closes its sockets at
//             once; a live host reconnects within a few hundred ms). Once
//             the job is ending (a stop or release decided, as this side
//             knows it) a close is the peer leaving: peer_loss again.
//             Counted from the host's first handshake: a host that never
//             connected is the caller's barrier timeout to report, not a
//             loss. A host that comes back as another trainit (another
//             instance: its trainit died and a new one started, within the
//             grace or not) once the barrier has let ranks start is lost
//             too: its ranks died with it. Before that, the new one simply
//             takes the old one's place (and checks in anew).
//
//   restart   a host whose rank failed asks for the next generation (a
//             client's restart(), or host 0's); host 0 begins it everywhere
//             (on_restart on the other hosts), the barrier and the finished
//             hosts start over, and every host checks in again with the new
//             generation; check-ins and GOs of another generation are
//             ignored. A stop ends restarting; the first request for a
//             generation wins.
//
// A state is sticky: a client that (re)connects after GO, STOP, RESTART or
// RELEASE is sent it again, and a client re-sends its check-in, its own
// restart request and its own stop on every reconnection. Every message, the
// handshake step by step and what the channel does not protect:
// net/PROTOCOL.md (wire format: net/wire.h; proofs: net/auth.h).
//
// Trust. The handshake is a mutual challenge-response: each side sends a
// fresh random nonce on every connection, and with a secret each proves it
// holds it by a tag over both nonces, its role and the job's identity (job
// id, host index, host count), so that nothing recorded from one connection
// passes on another. A side with a secret refuses one without (and the other
// way round); without a secret, any allowed address may claim any host
// index. The server takes connections only from `allowed` addresses (the
// peers' names resolved; empty: any address, where the platform names only
// host 0 and the secret is the only check). Before its HELLO a connection
// holds one of max(kMaxPending, host count) slots, at most kMaxPendingPerAddress of them per
// address, for at most min(handshake, kHelloDeadline); a new connection
// never waits for a slot: the oldest connection of its own address gives
// way, or when every slot is taken the oldest of the address holding the
// most. So silent or half-open connections, however many, do not keep a
// host out. Every field of every message is checked on both sides (exit
// codes 0-255, failing host and rank, printable bounded text, nothing
// trailing; a client stops only for itself). A connection that breaks a rule
// (bad frame or field, wrong job id, host index or count, secret, proof) is
// closed and affects nothing else. The server's warnings about such
// connections are rate-limited per address: the first at once, then one
// summary line with a count per kWarningInterval (net/peer_warnings.h); a
// client logs a problem with host 0 once, not once per retry. (These
// warnings are logged here, against src/'s habit of leaving logging to its
// caller: such a connection is nobody's, no caller hears of it.) The bytes
// after the handshake are not authenticated and nothing is encrypted.
//
// Everything runs on the loop (io and timer sources, no threads) and no call
// blocks. Before the process exits, when_sent() says when a last stop() or
// release() has left the host (at once, unless a peer stopped reading: the
// caller's timer bounds it). Events are called from the loop; a handler may
// destroy the object that called it.
//
// A single-host job needs none of this and should open no socket.
#pragma once

#include <netinet/in.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"
#include "base/time.h"
#include "loop/loop.h"
#include "net/auth.h"
#include "net/wire.h"

namespace trainit {

namespace net {
class Connection;
class PeerWarnings;
}  // namespace net

struct ControlConfig {
  unsigned host_index = 0;  // 0 for the server, 1..host_count-1 for a client
  unsigned host_count = 1;
  std::string job_id;    // every host's must match (MA_VJ_NAME, say)
  std::string secret;    // empty: none; else every host needs the same
  Duration peer_loss{};  // the job's --peer-loss (its default is the option's); required
  // Each side looks after its connections every min(heartbeat, peer_loss / 4);
  // a heartbeat goes out every peer_loss / 3 (net/control_common.h).
  Duration heartbeat = std::chrono::seconds(1);
  Duration handshake = std::chrono::seconds(5);  // a connection not through its handshake by then is dropped
  // A host whose connection closed has min(this, peer_loss) to reconnect.
  Duration reconnect_grace = std::chrono::seconds(1);
  // This trainit's instance, the same for its whole life (its server's or
  // client's every connection says it); 0: a random one.
  uint64_t instance = 0;
};

// Why a job stops: the failing host's account of it.
struct StopNotice {
  int exit_code = 1;
  int host = -1;  // the failing host's index
  int rank = -1;  // the failing rank, -1 when none
  std::string cause;
};

// What the channel tells its host. Every member may be empty.
struct ControlEvents {
  std::function<void()> on_go;                     // the barrier is released
  std::function<void(const StopNotice&)> on_stop;  // another host stopped the job
  std::function<void(int exit_code)> on_release;   // client: host 0's job ended with this code
  // That host is gone; `why`: "nothing heard from it for 10.0 s", "its
  // connection closed and it did not reconnect within 1.0 s".
  std::function<void(unsigned host, const std::string& why)> on_lost;
  std::function<void(unsigned host)> on_checked_in;  // server: that client checked in (once per host)
  std::function<void(unsigned host)> on_finished;    // server: every rank of that client's host exited 0
  // Another host's rank failed and the job starts again as `generation`
  // (1, 2, ...): stop this host's ranks, then check_in() for it.
  std::function<void(unsigned generation, const StopNotice&)> on_restart;
};

class ControlServer {
 public:
  // Connections before their handshake, at most (or the host count, where
  // larger); a new one past the limit takes the slot of the oldest (of its
  // address, else of the address with the most).
  static constexpr size_t kMaxPending = 64;
  // ... and at most this many from one address.
  static constexpr size_t kMaxPendingPerAddress = 4;
  // A connection has min(handshake, this) to send its HELLO (a real client
  // sends it one round trip after the CHALLENGE).
  static constexpr Duration kHelloDeadline = std::chrono::seconds(2);
  // Warnings about one address: one line per interval (then a summary), for
  // at most kWarnedAddresses addresses (the others share one entry).
  static constexpr Duration kWarningInterval = std::chrono::seconds(10);
  static constexpr size_t kWarnedAddresses = 64;

  // Listens on `port` (0: any; see port()) on every local address and serves
  // the clients at `allowed` addresses. Fails (with a message) on a config
  // that is not host 0's, a socket that cannot be opened, or a secret that
  // libsodium cannot take.
  static Result<std::unique_ptr<ControlServer>> listen(Loop& loop, uint16_t port, std::vector<in_addr> allowed,
                                                       ControlConfig config, ControlEvents events);
  ControlServer(const ControlServer&) = delete;
  ControlServer& operator=(const ControlServer&) = delete;
  ~ControlServer();  // closes every connection: the clients see host 0 gone

  // Host 0 itself is ready; GO goes out once every client is too.
  void check_in();
  // Stops the job everywhere: sends STOP to every client, and to any that
  // connects later. Returns false (and sends nothing) when a stop came first.
  bool stop(const StopNotice& notice);
  // Host 0's rank failed and the job starts again: the next generation
  // begins everywhere (RESTART to every client, and to any that connects
  // later); every host, host 0 too, checks in again for its barrier. Returns
  // the new generation, or 0 (and sends nothing) when a stop came first.
  unsigned restart(const StopNotice& notice);
  // Tells every client (and any that connects later) the job's exit code.
  void release(int exit_code);
  // `sent` is called once, from the loop (or now), when nothing queued for
  // a client waits any more: the last frames have left before the process
  // exits. Nothing waits for it; the caller bounds it with a timer.
  void when_sent(std::function<void()> sent);

  // Clients that have not finish()ed yet, ascending.
  [[nodiscard]] std::vector<unsigned> unfinished() const;
  // Whether every client finish()ed (unfinished() empty, without building it).
  [[nodiscard]] bool all_finished() const noexcept { return clients_finished_ + 1 == hosts_.size(); }
  // Hosts that have not checked in yet (0 too, until check_in()), ascending.
  [[nodiscard]] std::vector<unsigned> missing() const;
  [[nodiscard]] uint16_t port() const noexcept { return port_; }
  // Open connections, handshake done or not.
  [[nodiscard]] size_t connections() const noexcept { return links_.size(); }

 private:
  struct Link;
  void check_sent();
  struct Host {
    Link* link = nullptr;  // its current connection, if any
    bool joined = false;   // handshake done once: its loss counts from then on
    bool checked_in = false;
    bool finished = false;
    bool lost = false;
    uint64_t instance = 0;  // its trainit's, once joined
    Clock::time_point last_heard{};
    // When the host closed its connection, while it has not reconnected.
    std::optional<Clock::time_point> closed;
  };

  ControlServer(Loop& loop, ControlConfig config, ControlEvents events);
  int on_accept();
  void on_frame(Link* link, wire::Frame& frame);
  void on_hello(Link* link, const std::string& payload);
  void on_check_in(Link* link, const std::string& payload);
  void on_finished(Link* link, const std::string& payload);
  void on_stop(Link* link, const std::string& payload);
  void on_restart(Link* link, const std::string& payload);
  void begin_generation(const StopNotice& notice, const Link* from);
  int on_tick();
  int on_beat();
  // The peer closed `link` (not this side, for a broken rule): its host, if
  // the job still runs, has the reconnect grace to come back.
  void on_closed_by_peer(const Link* link);
  int on_grace();
  // Marks host `index` lost and tells the caller; false when the handler
  // destroyed this server.
  bool lose(unsigned index, const std::string& why);
  bool lose_keeping_link(unsigned index, const std::string& why);
  void maybe_go();
  // Connections waiting for their HELLO, at most: kMaxPending, or one a host
  // where the job has more (its hosts connect at once and must not evict
  // each other).
  [[nodiscard]] size_t max_pending() const noexcept;
  void evict_from_the_most();
  unsigned send_to_clients(const std::string& frame, const Link* except = nullptr);
  void fan_out(std::string_view what, const std::string& frame, const Link* except = nullptr);
  void refuse(Link* link, const std::string& why);
  // Closes `link` with a (rate-limited) warning: `verb` is "closed" or
  // "refused".
  void close_link(Link* link, std::string_view verb, const std::string& why);
  void drop(Link* link);
  // Before a new connection from `peer` is taken: frees a slot if it needs one.
  void make_room(in_addr peer);
  [[nodiscard]] Duration hello_deadline() const noexcept;
  [[nodiscard]] bool allowed(in_addr addr) const noexcept;

  Loop& loop_;
  ControlConfig config_;
  ControlEvents events_;
  std::optional<net::Auth> auth_;
  std::vector<in_addr> allowed_;
  Duration heartbeat_;
  Fd listen_fd_;
  uint16_t port_ = 0;
  std::vector<std::unique_ptr<Link>> links_;
  std::vector<Host> hosts_;        // by host index; hosts_[0] is this host
  size_t clients_checked_in_ = 0;  // hosts 1..H-1 checked in, this generation
  size_t clients_finished_ = 0;    // ... finished
  bool checked_in_ = false;
  bool go_ = false;
  bool went_ = false;                  // a GO of any generation: ranks may have started
  uint32_t generation_ = 0;            // the job's current start: 0, then one more per restart
  std::optional<StopNotice> restart_;  // why the current generation began
  std::optional<StopNotice> stop_;
  std::optional<int> release_;
  std::unique_ptr<net::PeerWarnings> warnings_;
  SourceHandle accept_io_;
  SourceHandle tick_;
  SourceHandle grace_timer_;  // at the first closed host's grace's end
  SourceHandle beat_timer_;
  const std::string heartbeat_frame_ = wire::encode(wire::Type::kHeartbeat);
  std::function<void()> sent_;  // when_sent()'s, until nothing waits
  std::shared_ptr<char> alive_ = std::make_shared<char>();
};

class ControlClient {
 public:
  // Starts connecting to host 0 at server:port and keeps at it (every 100 ms
  // at first, every 500 ms after a while, 2 s after a refusal) until the
  // client is destroyed. Fails (with a message) on a config that is not a
  // client's or a secret libsodium cannot take.
  static Result<std::unique_ptr<ControlClient>> connect(Loop& loop, in_addr server, uint16_t port, ControlConfig config,
                                                        ControlEvents events);
  ControlClient(const ControlClient&) = delete;
  ControlClient& operator=(const ControlClient&) = delete;
  ~ControlClient();

  // This host is ready: sent now if connected, else on connection.
  void check_in();
  // Every rank of this host exited 0: FINISHED to host 0 (now, or on
  // connection); the host then waits for on_release.
  void finish();
  // Stops the job: STOP to host 0 (now, or on connection), which relays it.
  // Returns false (and sends nothing) when a stop came first.
  bool stop(const StopNotice& notice);
  // This host's rank failed and the job starts again: asks host 0 for the
  // next generation (now, or on connection), then check_in() for it. Returns
  // that generation, or 0 when a stop came first.
  unsigned restart(const StopNotice& notice);
  // `sent` is called once, from the loop (or now), when nothing queued for
  // host 0 waits any more (or there is no connection to send on).
  void when_sent(std::function<void()> sent);
  // Connected to host 0, handshake done.
  [[nodiscard]] bool connected() const noexcept { return state_ == State::kReady; }

 private:
  enum class State { kWaiting, kConnecting, kChallenge, kWelcome, kReady };

  ControlClient(Loop& loop, in_addr server, uint16_t port, ControlConfig config, ControlEvents events);
  int attempt();
  int on_connect_io();
  void on_connected(Fd fd);
  void on_frame(wire::Frame& frame);
  void check_sent();
  [[nodiscard]] net::Handshake handshake() const;
  [[nodiscard]] StopNotice own_notice(const StopNotice& notice) const;
  void on_challenge(const std::string& payload);
  void on_welcome(const std::string& payload);
  void on_ready_frame(wire::Frame& frame);
  int on_tick();
  int on_beat();
  // Host 0 closed a connection through its handshake: the grace begins.
  void on_closed_by_host0();
  int on_grace();
  // Ends the current connection or attempt and tries again after `delay`.
  void retry(Duration delay);
  void protocol_error(const std::string& why);
  // Logs a problem with host 0 unless it is the one logged last: once, not
  // once per retry.
  void warn(const std::string& line);
  // The delay before the next attempt: 100 ms, doubling to 500 ms.
  Duration backoff();

  Loop& loop_;
  in_addr server_;
  uint16_t port_;
  ControlConfig config_;
  ControlEvents events_;
  std::optional<net::Auth> auth_;
  Duration heartbeat_;
  std::string endpoint_;  // "10.0.0.1:29500", for log lines
  State state_ = State::kWaiting;
  Clock::time_point attempt_started_{};
  Duration delay_;  // before the next attempt after a failed one
  Fd connecting_;
  SourceHandle connect_io_;
  std::unique_ptr<net::Connection> conn_;
  // This connection's nonces: both fresh on every connection, cleared when
  // it ends; net/auth.h.
  net::Nonce server_nonce_{};
  net::Nonce nonce_{};
  uint64_t server_instance_ = 0;  // host 0's trainit, of this connection's CHALLENGE
  uint64_t joined_instance_ = 0;  // host 0's trainit this host first joined
  bool joined_ = false;           // handshake done once: loss counts from then on
  bool went_ = false;             // a GO of any generation: ranks may have started
  bool lost_ = false;
  Clock::time_point last_heard_{};
  // When host 0 closed the connection, while no new one is through its
  // handshake.
  std::optional<Clock::time_point> closed_;
  bool checked_in_ = false;
  bool finished_ = false;
  uint32_t generation_ = 0;
  std::optional<StopNotice> own_restart_;  // asked for generation_, not confirmed by host 0 yet
  std::optional<StopNotice> own_stop_;
  bool go_ = false;
  bool stopped_ = false;  // host 0 told us of a stop
  bool released_ = false;
  std::string last_warning_;  // since the last handshake done
  SourceHandle retry_timer_;
  SourceHandle tick_;
  SourceHandle grace_timer_;
  SourceHandle beat_timer_;
  std::function<void()> sent_;  // when_sent()'s, until nothing waits
  std::shared_ptr<char> alive_ = std::make_shared<char>();
};

}  // namespace trainit
