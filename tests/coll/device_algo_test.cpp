// The device algorithm (src/coll/device_algo.h) and the lanes a GPU's
// thread block runs it with (device_lanes.h), on host threads: ranks as
// threads of this process over staging in plain memory, a block of a call
// as one thread, or as three (device_host.h). The code a GPU's kernel and the fake
// device run, here where ThreadSanitizer (the tsan workflow runs these)
// sees every hand-over — a step published before its data or before the
// block's barrier, a flag read without acquire, a staging region rewritten
// while a peer still reads it, a descriptor slot reused too soon.
// Every collective, dtype and op, one-shot and two-shot, in one piece and in
// many, in one block and several, calls back to back on the same staging,
// against the host kernels' fold; ranks that disagree; an abort and a
// timeout while ranks wait for a peer that never comes.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <functional>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "child_support.h"
#include "coll/device_host.h"
#include "coll/kernels.h"
#include "trainit/coll.h"

namespace {

using trainit::coll::dtype_size;
using trainit::coll::kDtypes;
using trainit::coll::kernels_scalar;
using trainit::coll::kOps;
using trainit::coll::test::Bytes;
using trainit::coll::test::now_ns;
using trainit::coll::test::random_values;
namespace dev = trainit::coll::dev;

// n ranks' staging, zeroed as a launching backend's memory reads.
struct Node {
  Node(int ranks, uint64_t quarter_bytes, int block_count)
      : n(ranks), quarter(quarter_bytes), blocks(block_count), staging(static_cast<size_t>(ranks)) {
    for (auto& s : staging) {
      s.assign(dev::kHeaderBytes + 4 * quarter, 0);
    }
  }
  int n;
  uint64_t quarter;
  int blocks;
  std::vector<Bytes> staging;
  uint64_t one_shot_max = 256 << 10;
  uint64_t block_bytes = 0;  // a call runs on a block per this many bytes (0: on every line)
  int64_t timeout_ns = 0;
  std::atomic<uint32_t> abort{0};
  unsigned threads = 1;  // a block's
};

struct Args {
  uint32_t kind;
  int dtype;
  int op;
  int root;
  uint64_t count;
  const void* send;
  void* recv;
  bool valid = true;
  // Zero copy: Call::where, and every rank's buffer (as this rank maps it).
  uint64_t where = 0;
  const std::vector<unsigned char*>* window = nullptr;
};

// Rank `rank`'s call, as device_call.cpp makes it.
dev::Call make_call(Node& node, int rank, const Args& q, uint64_t* status, uint64_t tag = 1) {
  dev::Call a{};
  a.kind = q.kind;
  a.dtype = q.dtype;
  a.op = q.op;
  a.root = q.root;
  a.n = node.n;
  a.rank = rank;
  a.lines = node.blocks;
  a.valid = q.valid ? 1 : 0;
  a.elem = static_cast<uint32_t>(dtype_size(q.dtype));
  a.count = q.count;
  a.blocks = dev::blocks_for(a.kind, a.count, a.elem, a.n, a.lines, node.block_bytes);
  a.send = static_cast<const unsigned char*>(q.send);
  a.recv = static_cast<unsigned char*>(q.recv);
  for (int p = 0; p < node.n; ++p) {
    a.staging[p] = node.staging[static_cast<size_t>(p)].data();
  }
  a.quarter = node.quarter;
  a.one_shot_max = node.one_shot_max;
  a.timeout_ns = node.timeout_ns;
  a.abort = reinterpret_cast<volatile uint32_t*>(&node.abort);
  a.status = status;
  a.tag = tag;
  a.where = q.where;
  for (int p = 0; q.window != nullptr && p < node.n; ++p) {
    a.window[p] = (*q.window)[static_cast<size_t>(p)];
  }
  a.desc = dev::descriptor(a);
  return a;
}

int call(Node& node, int rank, const Args& q, uint64_t* status, uint64_t tag = 1) {
  const dev::Call a = make_call(node, rank, q, status, tag);
  return dev::run_on_threads(a, node.threads, dev::host_fold(a, kernels_scalar()));
}

// The lanes of a block of one thread, counting the bytes of memory its
// copies and folds read and write.
class CountedLanes {
 public:
  CountedLanes(dev::HostChip& chip, size_t elem) : lanes_(chip), elem_(elem) {}
  int sync() { return lanes_.sync(); }
  static int64_t now_ns() { return dev::HostChip::now_ns(); }
  uint64_t last_step(int b, const dev::Call& a) const { return lanes_.last_step(b, a); }
  void publish(int b, uint64_t s, const dev::Call& a, bool first) { lanes_.publish(b, s, a, first); }
  int wait(int b, uint64_t s, const dev::Call& a, int64_t start) { return lanes_.wait(b, s, a, start); }
  bool agrees(int b, uint64_t s, const dev::Call& a) { return lanes_.agrees(b, s, a); }
  void step_idle(const dev::Call& a) { lanes_.step_idle(a); }
  int copy(void* dst, const void* src, size_t bytes) {
    bytes_ += dst == src ? 0 : 2 * bytes;
    return lanes_.copy(dst, src, bytes);
  }
  int fold(void* dst, void* also, const void* const* srcs, int n, size_t count) {
    bytes_ += count * elem_ * static_cast<size_t>(n + (also != nullptr ? 2 : 1));
    return lanes_.fold(dst, also, srcs, n, count);
  }
  uint64_t bytes() const { return bytes_; }

 private:
  dev::Lanes<dev::HostChip> lanes_;
  size_t elem_;
  uint64_t bytes_ = 0;
};

// Rank `rank`'s call in blocks of one thread: the bytes of memory it moved
// (a failed call: none).
uint64_t traffic_of_call(Node& node, int rank, const Args& q) {
  uint64_t status = 0;
  const dev::Call a = make_call(node, rank, q, &status);
  dev::HostBlock block;
  block.start(1);
  dev::HostChip chip(block, 0, dev::host_fold(a, kernels_scalar()), a.elem);
  CountedLanes lanes(chip, a.elem);
  for (int b = 0; b < a.blocks; ++b) {
    if (dev::Block<CountedLanes>(lanes, a, b).run() != 0) {
      return 0;
    }
  }
  return lanes.bytes();
}

// body(rank) on n threads; each one's return.
std::vector<int> on_threads(int n, const std::function<int(int)>& body) {
  std::vector<int> rc(static_cast<size_t>(n), -1);
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] { rc[static_cast<size_t>(r)] = body(r); });
  }
  for (auto& t : threads) {
    t.join();
  }
  return rc;
}

// dst = srcs[0] op … op srcs[n-1], by the host kernels.
Bytes fold_of(const std::vector<const unsigned char*>& srcs, size_t count, int dtype, int op) {
  Bytes out(count * dtype_size(dtype));
  if (count != 0) {
    std::vector<const void*> ins(srcs.begin(), srcs.end());
    kernels_scalar()->fold[dtype][op](out.data(), ins.data(), static_cast<int>(ins.size()), count);
  }
  return out;
}

struct Shape {
  int n;
  int blocks;
  uint64_t quarter;
  uint64_t one_shot_max;
  uint64_t count;
  bool every_type = true;  // else f32, f16 and i64 with sum and max: each element size, float and integer
  unsigned threads = 1;    // a block's (one: every thread hand-over is the test below's)
  // Every rank's buffers are windows: a call that window_buffer() names
  // goes zero copy (as device_call.cpp places it), the others are staged.
  bool windows = false;
  uint64_t block_bytes = 0;  // Node::block_bytes
};

bool in_shape(const Shape& shape, int dtype, int op) {
  return shape.every_type || ((dtype == TRAINIT_F32 || dtype == TRAINIT_F16 || dtype == TRAINIT_I64) &&
                              (op == TRAINIT_SUM || op == TRAINIT_MAX));
}

// Every collective, dtype and op on the node, back to back, in and out of
// place: each rank's result against the host kernels'. The failures, in
// words; the kinds that went zero copy, into *zero_copied (unless null).
std::vector<std::string> run_all(const Shape& shape, std::set<uint32_t>* zero_copied = nullptr) {
  Node node(shape.n, shape.quarter, shape.blocks);
  node.one_shot_max = shape.one_shot_max;
  node.threads = shape.threads;
  node.block_bytes = shape.block_bytes;
  const auto un = static_cast<size_t>(shape.n);
  std::vector<std::string> failures;
  std::mutex failures_lock;
  const auto fail = [&](const std::string& what) {
    const std::lock_guard<std::mutex> guard(failures_lock);
    failures.push_back(what);
  };
  for (uint32_t kind = dev::kAllreduce; kind <= dev::kBroadcast; ++kind) {
    for (int dtype = 0; dtype < kDtypes; ++dtype) {
      for (int op = 0; op < (dev::reduces(kind) ? kOps : 1); ++op) {
        for (const bool in_place : {false, true}) {
          if (!in_shape(shape, dtype, op)) {
            continue;
          }
          const size_t es = dtype_size(dtype);
          const uint64_t c = shape.count;
          const size_t send_count = kind == dev::kReduceScatter ? c * un : c;
          const size_t recv_count = kind == dev::kAllgather ? c * un : c;
          const int root = shape.n - 1;
          std::vector<Bytes> inputs;
          for (int r = 0; r < shape.n; ++r) {
            inputs.push_back(random_values(dtype, send_count, static_cast<uint32_t>(kind * 977 + dtype * 31 + op + r)));
          }
          std::vector<Bytes> bufs(un);
          std::vector<Bytes> sends(un);
          for (size_t r = 0; r < un; ++r) {
            const size_t buf_count = in_place ? (send_count > recv_count ? send_count : recv_count) : recv_count;
            bufs[r].assign(buf_count * es, 0);
            sends[r] = inputs[r];
            if (in_place || kind == dev::kBroadcast) {
              const size_t at = kind == dev::kAllgather ? c * es * r : 0;
              std::memcpy(bufs[r].data() + at, inputs[r].data(), inputs[r].size());
            }
          }
          // The buffer a zero-copy call names is the same one on every rank.
          std::vector<unsigned char*> window;
          for (size_t r = 0; r < un; ++r) {
            window.push_back(dev::reduces(kind) && !in_place ? sends[r].data() : bufs[r].data());
          }
          std::atomic<bool> zero_copy{false};
          const auto rc = on_threads(shape.n, [&](int rank) {
            const auto r = static_cast<size_t>(rank);
            unsigned char* recv = bufs[r].data();
            const void* send = kind == dev::kBroadcast ? nullptr : in_place ? recv : sends[r].data();
            uint64_t status = 0;
            Args q{kind, dtype, op, kind == dev::kReduce || kind == dev::kBroadcast ? root : 0, c, send, recv};
            if (shape.windows && dev::window_buffer(make_call(node, rank, q, &status)) == window[r]) {
              q.where = dev::window_where(0, 0);
              q.window = &window;
              zero_copy = true;
            }
            return call(node, rank, q, &status);
          });
          if (zero_copy && zero_copied != nullptr) {
            zero_copied->insert(kind);
          }
          // What every rank's recv must hold.
          std::vector<const unsigned char*> all;
          for (const auto& in : inputs) {
            all.push_back(in.data());
          }
          for (size_t r = 0; r < un; ++r) {
            const std::string where = "kind " + std::to_string(kind) + " dtype " + std::to_string(dtype) + " op " +
                                      std::to_string(op) + (in_place ? " in place" : "") + " rank " + std::to_string(r);
            if (rc[r] != 0) {
              fail(where + ": returned " + std::to_string(rc[r]));
              continue;
            }
            Bytes want;
            switch (kind) {
              case dev::kAllreduce:
                want = fold_of(all, c, dtype, op);
                break;
              case dev::kReduce:
                if (static_cast<int>(r) != root) {
                  continue;
                }
                want = fold_of(all, c, dtype, op);
                break;
              case dev::kReduceScatter: {
                std::vector<const unsigned char*> segs;
                for (const auto& in : inputs) {
                  segs.push_back(in.data() + r * c * es);
                }
                want = fold_of(segs, c, dtype, op);
                break;
              }
              case dev::kAllgather:
                for (const auto& in : inputs) {
                  want.insert(want.end(), in.begin(), in.end());
                }
                break;
              default:
                want = inputs[static_cast<size_t>(root)];
            }
            if (std::memcmp(bufs[r].data(), want.data(), recv_count * es) != 0) {
              fail(where + ": not the host kernels' result bit for bit");
            }
          }
        }
      }
    }
  }
  return failures;
}

std::string joined(const std::vector<std::string>& lines) {
  std::string out;
  for (size_t i = 0; i < lines.size() && i < 8; ++i) {
    out += lines[i] + "\n";
  }
  return out;
}

TEST(CollDeviceAlgo, OneShotInOnePieceOnTwoToFourRanksEqualsTheHostKernels) {
  for (const int n : {2, 3, 4}) {
    const auto failures = run_all({n, 1, 64 << 10, 256 << 10, 301});
    EXPECT_TRUE(failures.empty()) << n << " ranks:\n" << joined(failures);
  }
}

TEST(CollDeviceAlgo, ManyPiecesInSeveralBlocksEqualTheHostKernels) {
  for (const int n : {2, 3, 4}) {
    const auto failures = run_all({n, 3, 1024, 256 << 10, 1001, false});
    EXPECT_TRUE(failures.empty()) << n << " ranks:\n" << joined(failures);
  }
}

TEST(CollDeviceAlgo, TwoShotAllreduceAndReduceEqualTheHostKernelsInOneAndManyPieces) {
  for (const int n : {2, 3, 4}) {
    for (const uint64_t quarter : {uint64_t{64} << 10, uint64_t{1024}}) {
      const auto failures = run_all({n, 2, quarter, 64, 777, false});
      EXPECT_TRUE(failures.empty()) << n << " ranks, quarter " << quarter << ":\n" << joined(failures);
    }
  }
}

// A block as three threads, as a GPU's thread block runs it: each thread
// its strided share (three split the elements unevenly), the block's
// barrier before thread 0 publishes, the wait's outcome handed over through
// the shared slot. One-shot and two-shot, in several pieces and blocks.
TEST(CollDeviceAlgo, ABlockOfThreeThreadsHandsEveryStepOverAtItsBarriers) {
  auto failures = run_all({3, 3, 1024, 256 << 10, 301, false, 3});
  EXPECT_TRUE(failures.empty()) << "one-shot:\n" << joined(failures);
  failures = run_all({3, 2, 1024, 64, 301, false, 3});
  EXPECT_TRUE(failures.empty()) << "two-shot:\n" << joined(failures);
}

TEST(CollDeviceAlgo, RanksThatDisagreeAllGetEinvalAfterOneStepAndStayInStep) {
  Node node(3, 1024, 2);
  std::vector<std::vector<float>> bufs(3, std::vector<float>(64, 1.0F));
  const auto rc = on_threads(3, [&](int rank) {
    float* buf = bufs[static_cast<size_t>(rank)].data();
    uint64_t status = 0;
    // Rank 1 asks for another count; then rank 2's arguments are invalid.
    const int first =
        call(node, rank, {dev::kAllreduce, TRAINIT_F32, TRAINIT_SUM, 0, rank == 1 ? 32U : 64U, buf, buf}, &status);
    Args bad{dev::kAllreduce, TRAINIT_F32, TRAINIT_SUM, 0, 64, buf, buf};
    bad.valid = rank != 2;
    const int second = call(node, rank, bad, &status);
    const int third = call(node, rank, {dev::kAllreduce, TRAINIT_F32, TRAINIT_SUM, 0, 64, buf, buf}, &status);
    return first == -EINVAL && second == -EINVAL && third == 0 && buf[63] == 3.0F ? 0 : 1;
  });
  EXPECT_EQ(rc, std::vector<int>({0, 0, 0}));
}

TEST(CollDeviceAlgo, ACallRunsOnABlockPerBlockBytesOfWhatARankMovesFromOneToEveryLine) {
  EXPECT_EQ(dev::blocks_for(dev::kAllreduce, 1, 4, 2, 32, 16384), 1);
  EXPECT_EQ(dev::blocks_for(dev::kBarrier, 0, 4, 2, 32, 16384), 1);
  EXPECT_EQ(dev::blocks_for(dev::kAllreduce, 4096, 4, 2, 32, 16384), 1);
  EXPECT_EQ(dev::blocks_for(dev::kAllreduce, 4097, 4, 2, 32, 16384), 2);
  EXPECT_EQ(dev::blocks_for(dev::kAllreduce, 1 << 18, 4, 2, 32, 16384), 32) << "1 MiB: every line";
  EXPECT_EQ(dev::blocks_for(dev::kAllreduce, 1 << 16, 4, 2, 8, 16384), 8) << "never past the lines";
  EXPECT_EQ(dev::blocks_for(dev::kAllgather, 4096, 4, 3, 32, 16384), 3) << "every rank's part";
  EXPECT_EQ(dev::blocks_for(dev::kReduceScatter, 4096, 4, 3, 32, 16384), 3) << "every rank's segment";
  EXPECT_EQ(dev::blocks_for(dev::kAllreduce, 1, 4, 2, 32, 0), 32) << "0 bytes: every line, whatever the size";
  EXPECT_EQ(dev::blocks_for(dev::kAllreduce, ~uint64_t{0}, 1, 2, 32, 16384), 32);
}

// Calls of every size on four lines, a block per 512 bytes: 301 elements
// of 2, 4 and 8 bytes (and an allgather's and reduce_scatter's n parts) run
// on one to four blocks, one-shot and two-shot, 40 in blocks of three
// threads, and zero copy past the bound, each block through its line's
// region, back to back on the same staging.
TEST(CollDeviceAlgo, CallsOnFewerBlocksThanLinesEqualTheHostKernels) {
  for (Shape shape : {Shape{2, 4, 1024, 256 << 10, 301, false}, Shape{3, 4, 1024, 64, 301, false},
                      Shape{3, 4, 1024, 256 << 10, 40, false, 3}, Shape{3, 4, 1024, 64, 301, false, 1, true}}) {
    shape.block_bytes = 512;
    std::set<uint32_t> zero_copied;
    const auto failures = run_all(shape, &zero_copied);
    EXPECT_TRUE(failures.empty()) << shape.n << " ranks, " << shape.count << " elements, one-shot bound "
                                  << shape.one_shot_max << ", " << shape.threads << " threads a block"
                                  << (shape.windows ? ", in windows" : "") << ":\n"
                                  << joined(failures);
    EXPECT_EQ(zero_copied.size(), shape.windows ? 5U : 0U);
  }
}

// A call on one block of four lines moves its pieces through line 0's
// region alone, never the others', which a peer may still be reading from
// the call before on every block: 4-block and 1-block calls in turn, each
// checked, every hand-over in ThreadSanitizer's sight. (800 bytes are one
// piece where the block's region were the whole quarter: an odd number of
// steps on line 0, so that its parity comes round to the other lines'
// last one; such a call corrupts its peers' reads.)
TEST(CollDeviceAlgo, ACallOnOneBlockKeepsToItsLinesRegionWhilePeersStillReadTheOthers) {
  Node node(3, 1024, 4);  // 256-byte regions
  node.block_bytes = 4096;
  const auto rc = on_threads(3, [&](int rank) {
    std::vector<float> buf(4096);
    int wrong = 0;
    for (int i = 0; i < 40; ++i) {
      const uint64_t count = i % 2 == 0 ? 4096 : 200;  // 16 KiB on four blocks, 800 bytes on one
      std::fill(buf.begin(), buf.end(), static_cast<float>(rank + 1 + i));
      uint64_t status = 0;
      const int r =
          call(node, rank, {dev::kAllreduce, TRAINIT_F32, TRAINIT_SUM, 0, count, buf.data(), buf.data()}, &status);
      const auto want = static_cast<float>(6 + 3 * i);
      wrong += r != 0 || std::any_of(buf.begin(), buf.begin() + static_cast<ptrdiff_t>(count),
                                     [&](float v) { return v != want; })
                   ? 1
                   : 0;
    }
    return wrong;
  });
  EXPECT_EQ(rc, std::vector<int>({0, 0, 0}));
}

// Rank r's step on each of the node's lines.
std::vector<uint64_t> steps_of(const Node& node, int rank) {
  std::vector<uint64_t> steps;
  for (int b = 0; b < node.blocks; ++b) {
    const auto* l = reinterpret_cast<const dev::Line*>(node.staging[static_cast<size_t>(rank)].data() +
                                                       static_cast<size_t>(b) * dev::kLineBytes);
    steps.push_back(__atomic_load_n(&l->seq, __ATOMIC_ACQUIRE));
  }
  return steps;
}

// A small call meets its peers on one line, not on every line; ranks whose
// counts put their calls on different blocks (1, 4 and 2 of 4) all get
// -EINVAL, every line of every rank one step on, and the calls after it,
// on every line and on one, are right: with blocks of one thread and of
// three, one-shot and two-shot.
TEST(CollDeviceAlgo, RanksWhoseCallsRunOnDifferentBlocksAllGetEinvalAndEveryLineStaysInStep) {
  for (const unsigned threads : {1U, 3U}) {
    for (const uint64_t one_shot : {uint64_t{256} << 10, uint64_t{64}}) {
      Node node(3, 1024, 4);
      node.block_bytes = 64;
      node.timeout_ns = 5'000'000'000;  // a line a rank never steps: -ETIMEDOUT, not a hang
      node.threads = threads;
      node.one_shot_max = one_shot;
      std::vector<std::vector<float>> bufs(3, std::vector<float>(64, 1.0F));
      std::vector<std::vector<uint64_t>> small(3);
      std::vector<std::vector<uint64_t>> disagreed(3);
      const auto rc = on_threads(3, [&](int rank) {
        float* buf = bufs[static_cast<size_t>(rank)].data();
        uint64_t status = 0;
        const auto allreduce = [&](uint64_t count) {
          return call(node, rank, {dev::kAllreduce, TRAINIT_F32, TRAINIT_SUM, 0, count, buf, buf}, &status);
        };
        const int tiny = allreduce(4);  // 16 bytes: one block
        small[static_cast<size_t>(rank)] = steps_of(node, rank);
        const int differ = allreduce(rank == 0 ? 4 : rank == 1 ? 64 : 32);
        disagreed[static_cast<size_t>(rank)] = steps_of(node, rank);
        std::fill(bufs[static_cast<size_t>(rank)].begin(), bufs[static_cast<size_t>(rank)].end(), 1.0F);
        const int all = allreduce(64);  // every line
        const bool all_right = buf[0] == 3.0F && buf[63] == 3.0F;
        const int one = allreduce(4);
        const bool one_right = buf[0] == 9.0F && buf[3] == 9.0F && buf[4] == 3.0F;
        const int again = allreduce(64);
        const bool again_right = buf[0] == 27.0F && buf[63] == 9.0F;
        return tiny == 0 && differ == -EINVAL && all == 0 && all_right && one == 0 && one_right && again == 0 &&
                       again_right
                   ? 0
                   : 1;
      });
      EXPECT_EQ(rc, std::vector<int>({0, 0, 0})) << threads << " threads a block, one-shot bound " << one_shot;
      for (int r = 0; r < 3; ++r) {
        EXPECT_EQ(small[static_cast<size_t>(r)], std::vector<uint64_t>({1, 0, 0, 0})) << "rank " << r;
        EXPECT_EQ(disagreed[static_cast<size_t>(r)], std::vector<uint64_t>({2, 1, 1, 1})) << "rank " << r;
        EXPECT_EQ(steps_of(node, r), steps_of(node, 0)) << "rank " << r << "'s lines against rank 0's";
      }
    }
  }
}

TEST(CollDeviceAlgo, AnAbortEndsTheWaitsOfRanksWhoseLastPeerNeverCameWithEconnaborted) {
  Node node(3, 1024, 2);
  std::vector<std::vector<float>> bufs(3, std::vector<float>(4096, 1.0F));
  std::vector<int64_t> ended(2, 0);
  std::thread aborter([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(30));
    node.abort.store(1, std::memory_order_release);
  });
  const int64_t start = now_ns();
  const auto rc = on_threads(2, [&](int rank) {  // rank 2 never calls
    float* buf = bufs[static_cast<size_t>(rank)].data();
    uint64_t status = 0;
    const int r = call(node, rank, {dev::kAllreduce, TRAINIT_F32, TRAINIT_SUM, 0, 4096, buf, buf}, &status);
    ended[static_cast<size_t>(rank)] = now_ns();
    return r == dev::status_error(status) && dev::status_tag(status) == 1 ? r : 1;
  });
  aborter.join();
  EXPECT_EQ(rc, std::vector<int>({-ECONNABORTED, -ECONNABORTED}));
  for (const int64_t t : ended) {
    EXPECT_LT((t - start) / 1'000'000, 1000) << "a rank returned long after the abort";
  }
}

TEST(CollDeviceAlgo, APeerThatNeverComesEndsTheCallWithEtimedoutAfterTheTimeout) {
  Node node(2, 1024, 1);
  node.timeout_ns = 50'000'000;
  std::vector<float> buf(16, 1.0F);
  uint64_t status = 0;
  const int64_t start = now_ns();
  const int r = call(node, 0, {dev::kAllreduce, TRAINIT_F32, TRAINIT_SUM, 0, 16, buf.data(), buf.data()}, &status);
  const int64_t ms = (now_ns() - start) / 1'000'000;
  EXPECT_EQ(r, -ETIMEDOUT);
  EXPECT_EQ(status, dev::status_of(1, -ETIMEDOUT));
  EXPECT_GE(ms, 50);
  EXPECT_LT(ms, 2000);
}

// The status slot a call shares with the call a ring's length before it:
// that call's error is replaced, one of this call's own is kept. A call
// that fails for good also sets the abort word: a call after it ends at
// its first check.
TEST(CollDeviceAlgo, AFailedCallTagsItsErrorReplacingAnEarlierCallsAndKeepsTheFirstOfItsOwn) {
  Node node(2, 1024, 2);
  node.timeout_ns = 20'000'000;
  std::vector<float> buf(16, 1.0F);
  const Args alone{dev::kAllreduce, TRAINIT_F32, TRAINIT_SUM, 0, 16, buf.data(), buf.data()};
  uint64_t status = dev::status_of(7, -EIO);
  EXPECT_EQ(call(node, 0, alone, &status, 7 + dev::kStatusSlots), -ETIMEDOUT);
  EXPECT_EQ(status, dev::status_of(7 + dev::kStatusSlots, -ETIMEDOUT));
  EXPECT_EQ(node.abort.load(), 1U);
  status = 0;
  EXPECT_EQ(call(node, 0, alone, &status, 8), -ECONNABORTED);
  EXPECT_EQ(status, dev::status_of(8, -ECONNABORTED));
  node.abort = 0;  // as a fresh communicator's
  status = dev::status_of(9, -EINVAL);
  EXPECT_EQ(call(node, 0, alone, &status, 9), -ETIMEDOUT);
  EXPECT_EQ(status, dev::status_of(9, -EINVAL));
}

// A synchronous call's done words (Call::done): every block of the call
// stores its tag once the block is done, whether the call succeeded or
// failed (a block after one that failed for good, which does not run, at
// once), and no word past the call's blocks.
TEST(CollDeviceAlgo, EveryBlockStoresTheCallsTagInItsDoneWordWhetherTheCallSucceedsOrFails) {
  Node node(2, 1024, 3);
  node.threads = 3;
  std::vector<std::vector<float>> bufs(2, std::vector<float>(301, 1.0F));
  std::vector<std::vector<uint64_t>> done(2, std::vector<uint64_t>(dev::kMaxBlocks, 0));
  const auto synchronous = [&](int rank, const Args& q, uint64_t tag) {
    uint64_t status = 0;
    dev::Call a = make_call(node, rank, q, &status, tag);
    a.done = done[static_cast<size_t>(rank)].data();
    return dev::run_on_threads(a, node.threads, dev::host_fold(a, kernels_scalar()));
  };
  const auto rc = on_threads(2, [&](int rank) {
    float* buf = bufs[static_cast<size_t>(rank)].data();
    const int right = synchronous(rank, {dev::kAllreduce, TRAINIT_F32, TRAINIT_SUM, 0, 301, buf, buf}, 5);
    const std::vector<uint64_t> after_right = done[static_cast<size_t>(rank)];
    const int disagreed =
        synchronous(rank, {dev::kAllreduce, TRAINIT_F32, TRAINIT_SUM, 0, rank == 0 ? 301U : 300U, buf, buf}, 6);
    const std::vector<uint64_t> after_disagreed = done[static_cast<size_t>(rank)];
    const bool tagged =
        std::all_of(after_right.begin(), after_right.begin() + 3, [](uint64_t t) { return t == 5; }) &&
        std::all_of(after_disagreed.begin(), after_disagreed.begin() + 3, [](uint64_t t) { return t == 6; }) &&
        std::all_of(after_disagreed.begin() + 3, after_disagreed.end(), [](uint64_t t) { return t == 0; });
    return right == 0 && buf[300] == 2.0F && disagreed == -EINVAL && tagged ? 0 : 1;
  });
  EXPECT_EQ(rc, std::vector<int>({0, 0}));
  // Rank 0 alone: its first block times out; the two after it never run.
  node.timeout_ns = 20'000'000;
  EXPECT_EQ(synchronous(0, {dev::kAllreduce, TRAINIT_F32, TRAINIT_SUM, 0, 301, bufs[0].data(), bufs[0].data()}, 7),
            -ETIMEDOUT);
  EXPECT_EQ(std::vector<uint64_t>(done[0].begin(), done[0].begin() + 4), std::vector<uint64_t>({7, 7, 7, 0}));
}

TEST(CollDeviceAlgo, ACallOfNoElementsStillAgreesAndTakesItsStep) {
  Node node(2, 1024, 2);
  std::vector<float> bufs(2 * 8, 2.0F);
  const auto rc = on_threads(2, [&](int rank) {
    float* buf = bufs.data() + rank * 8;
    uint64_t status = 0;
    const int empty = call(node, rank, {dev::kAllreduce, TRAINIT_F32, TRAINIT_SUM, 0, 0, nullptr, nullptr}, &status);
    const int next = call(node, rank, {dev::kAllreduce, TRAINIT_F32, TRAINIT_SUM, 0, 8, buf, buf}, &status);
    return empty == 0 && next == 0 && buf[7] == 4.0F ? 0 : 1;
  });
  EXPECT_EQ(rc, std::vector<int>({0, 0}));
}

// Parts start on 16-byte bounds (an aligned buffer's parts move in vectors
// on the GPU), tile the whole in order, and give the rest to the last.
TEST(CollDeviceAlgo, PartsTileTheWholeAndAllButTheLastEndOnSixteenByteBounds) {
  for (const uint64_t elem : {1U, 2U, 4U, 8U}) {
    dev::Call a{};
    a.elem = static_cast<uint32_t>(elem);
    const uint64_t g = dev::grain(a);
    EXPECT_EQ(g * elem, 16U);
    for (const uint64_t len : {0U, 1U, 15U, 16U, 17U, 1000U, 100003U}) {
      for (const int k : {1, 2, 3, 7, 16, 32}) {
        uint64_t at = 0;
        for (int i = 0; i < k; ++i) {
          const dev::Range r = dev::part(len, k, i, g);
          ASSERT_EQ(r.lo, at) << "elem " << elem << ", len " << len << ", part " << i << " of " << k;
          ASSERT_LE(r.lo, r.hi);
          if (i + 1 < k) {
            ASSERT_EQ(r.hi % g, 0U);
            ASSERT_LE(r.len(), len / static_cast<uint64_t>(k) + g);
          }
          at = r.hi;
        }
        EXPECT_EQ(at, len);
      }
    }
  }
}

// What a rank alone reads stays where it is: a two-shot rank folds its own
// share from its send buffer and writes it to recv as it folds, a
// reduce_scatter's rank its own segment; every other byte is staged once.
// All ranks together, per byte reduced: a two-shot allreduce moves 5N - 2
// bytes of memory (its peers' shares in, every share folded, its share out
// twice, its peers' shares back); a reduce_scatter 3N - 1 per byte of a
// segment, each rank. In many pieces and blocks, so the parts round.
TEST(CollDeviceAlgo, EachRankLeavesWhatOnlyItReadsUnstaged) {
  for (const int n : {2, 3, 4}) {
    const auto un = static_cast<size_t>(n);
    const uint64_t count = 1001;
    const uint64_t bytes = count * sizeof(float);
    Node node(n, 1024, 2);
    node.one_shot_max = 64;
    std::vector<std::vector<float>> bufs(un, std::vector<float>(count * un, 1.0F));
    std::vector<uint64_t> moved(un, 0);
    (void)on_threads(n, [&](int rank) {
      float* buf = bufs[static_cast<size_t>(rank)].data();
      moved[static_cast<size_t>(rank)] =
          traffic_of_call(node, rank, {dev::kAllreduce, TRAINIT_F32, TRAINIT_SUM, 0, count, buf, buf});
      return 0;
    });
    uint64_t all = 0;
    for (size_t r = 0; r < un; ++r) {
      all += moved[r];
      EXPECT_EQ(bufs[r][count - 1], static_cast<float>(n)) << n << " ranks, rank " << r;
    }
    EXPECT_EQ(all, bytes * static_cast<uint64_t>(5 * n - 2)) << n << " ranks, two-shot allreduce";

    std::vector<std::vector<float>> outs(un, std::vector<float>(count, 0.0F));
    for (auto& buf : bufs) {
      std::fill(buf.begin(), buf.end(), 1.0F);
    }
    (void)on_threads(n, [&](int rank) {
      const auto r = static_cast<size_t>(rank);
      moved[r] = traffic_of_call(
          node, rank, {dev::kReduceScatter, TRAINIT_F32, TRAINIT_SUM, 0, count, bufs[r].data(), outs[r].data()});
      return 0;
    });
    for (size_t r = 0; r < un; ++r) {
      EXPECT_EQ(moved[r], bytes * static_cast<uint64_t>(3 * n - 1)) << n << " ranks, reduce_scatter, rank " << r;
      EXPECT_EQ(outs[r][count - 1], static_cast<float>(n)) << n << " ranks, rank " << r;
    }
  }
}

// Zero copy: an allreduce in place on windows (the ranks' buffers, each
// mapped by every peer) reads and writes them where they lie, each rank
// folding its share of every block from every buffer in rank order and
// writing it into all of them. Every dtype and op on three ranks; two and
// four ranks, blocks of one and of three threads; each call followed by a
// staged one on the same staging, so the steps of the two kinds interleave.
TEST(CollDeviceAlgo, ZeroCopyAllreduceOnWindowsEqualsTheHostKernelsBetweenStagedCalls) {
  struct ZeroCopyShape {
    int n;
    int blocks;
    unsigned threads;
    bool every_type;
  };
  std::vector<std::string> failures;
  for (const ZeroCopyShape shape : {ZeroCopyShape{3, 2, 1, true}, {2, 3, 3, false}, {4, 1, 1, false}}) {
    Node node(shape.n, 1024, shape.blocks);
    node.one_shot_max = 64;
    node.threads = shape.threads;
    const auto un = static_cast<size_t>(shape.n);
    const uint64_t count = 1001;
    for (int dtype = 0; dtype < kDtypes; ++dtype) {
      for (int op = 0; op < kOps; ++op) {
        const Shape typed{shape.n, shape.blocks, 1024, 64, count, shape.every_type};
        if (!in_shape(typed, dtype, op)) {
          continue;
        }
        const size_t bytes = count * dtype_size(dtype);
        std::vector<Bytes> inputs;
        std::vector<Bytes> bufs;
        std::vector<unsigned char*> window;
        for (size_t r = 0; r < un; ++r) {
          inputs.push_back(random_values(dtype, count, static_cast<uint32_t>(dtype * 131 + op * 7 + r)));
          bufs.push_back(inputs.back());
        }
        for (auto& b : bufs) {
          window.push_back(b.data());
        }
        std::vector<std::vector<float>> staged(un, std::vector<float>(300, 1.0F));
        const auto rc = on_threads(shape.n, [&](int rank) {
          unsigned char* buf = window[static_cast<size_t>(rank)];
          uint64_t status = 0;
          Args q{dev::kAllreduce, dtype, op, 0, count, buf, buf};
          q.where = dev::window_where(0, 0);
          q.window = &window;
          const int zero_copy = call(node, rank, q, &status);
          float* next = staged[static_cast<size_t>(rank)].data();
          const int after = call(node, rank, {dev::kAllreduce, TRAINIT_F32, TRAINIT_SUM, 0, 300, next, next}, &status);
          return zero_copy != 0 ? zero_copy : after != 0 ? after : next[299] == static_cast<float>(shape.n) ? 0 : 1;
        });
        std::vector<const unsigned char*> all;
        for (const auto& in : inputs) {
          all.push_back(in.data());
        }
        const Bytes want = fold_of(all, count, dtype, op);
        for (size_t r = 0; r < un; ++r) {
          const std::string where = std::to_string(shape.n) + " ranks, dtype " + std::to_string(dtype) + " op " +
                                    std::to_string(op) + " rank " + std::to_string(r);
          if (rc[r] != 0) {
            failures.push_back(where + ": returned " + std::to_string(rc[r]));
          } else if (std::memcmp(bufs[r].data(), want.data(), bytes) != 0) {
            failures.push_back(where + ": not the host kernels' result bit for bit");
          }
        }
      }
    }
  }
  EXPECT_TRUE(failures.empty()) << joined(failures);
}

// Zero copy for every kind window_buffer() names: each rank's buffers are
// windows, so an allreduce or a reduce (their sends; out of place, results
// through staging), an allgather (in place or not), a reduce_scatter out of
// place and a broadcast past the one-shot bound read the ranks' buffers
// where they lie, back to back with the calls that stage (a reduce_scatter
// in place, those at most the bound) on the same staging.
// Every dtype and op on three ranks; two and four ranks, blocks of one and
// of three threads.
TEST(CollDeviceAlgo, ZeroCopyCallsOfEveryKindOnWindowsEqualTheHostKernelsAmongStagedOnes) {
  const std::set<uint32_t> kinds{dev::kAllreduce, dev::kReduce, dev::kReduceScatter, dev::kAllgather, dev::kBroadcast};
  for (const Shape& shape : {Shape{3, 2, 1024, 64, 1001, true, 1, true}, Shape{2, 3, 1024, 64, 777, false, 3, true},
                             Shape{4, 1, 1024, 64, 1001, false, 1, true}}) {
    std::set<uint32_t> zero_copied;
    const auto failures = run_all(shape, &zero_copied);
    EXPECT_TRUE(failures.empty()) << shape.n << " ranks:\n" << joined(failures);
    EXPECT_EQ(zero_copied, kinds) << shape.n << " ranks";
  }
}

// The calls that zero copy where their buffer lies in a window, and which
// buffer: only past the one-shot bound, with more than one rank; an
// allreduce's or reduce's send (in place, its buffer), a reduce_scatter's
// send out of place; never an invalid call.
TEST(CollDeviceAlgo, WindowBufferNamesTheBufferOfTheCallsZeroCopyServesPastTheOneShotBound) {
  unsigned char send[64];
  unsigned char recv[64];
  const auto call_of = [&](uint32_t kind, uint64_t count, const unsigned char* s, unsigned char* r) {
    dev::Call a{};
    a.kind = kind;
    a.n = 2;
    a.elem = 4;
    a.count = count;
    a.valid = 1;
    a.one_shot_max = 32;
    a.send = s;
    a.recv = r;
    return a;
  };
  EXPECT_EQ(dev::window_buffer(call_of(dev::kAllreduce, 9, recv, recv)), recv);
  EXPECT_EQ(dev::window_buffer(call_of(dev::kAllreduce, 8, recv, recv)), nullptr) << "at the one-shot bound";
  EXPECT_EQ(dev::window_buffer(call_of(dev::kAllreduce, 9, send, recv)), send) << "out of place";
  EXPECT_EQ(dev::window_buffer(call_of(dev::kReduce, 9, send, recv)), send);
  EXPECT_EQ(dev::window_buffer(call_of(dev::kReduce, 9, send, nullptr)), send) << "a reduce's non-root";
  EXPECT_EQ(dev::window_buffer(call_of(dev::kReduce, 8, send, recv)), nullptr) << "one-shot";
  EXPECT_EQ(dev::window_buffer(call_of(dev::kReduceScatter, 9, send, recv)), send);
  EXPECT_EQ(dev::window_buffer(call_of(dev::kReduceScatter, 9, recv, recv)), nullptr) << "in place";
  EXPECT_EQ(dev::window_buffer(call_of(dev::kAllgather, 9, send, recv)), recv);
  EXPECT_EQ(dev::window_buffer(call_of(dev::kAllgather, 9, recv, recv)), recv);
  EXPECT_EQ(dev::window_buffer(call_of(dev::kBroadcast, 9, nullptr, recv)), recv);
  EXPECT_EQ(dev::window_buffer(call_of(dev::kBarrier, 0, nullptr, nullptr)), nullptr);
  dev::Call one = call_of(dev::kAllgather, 9, send, recv);
  one.n = 1;
  EXPECT_EQ(dev::window_buffer(one), nullptr) << "one rank";
  dev::Call invalid = call_of(dev::kAllgather, 9, send, recv);
  invalid.valid = 0;
  EXPECT_EQ(dev::window_buffer(invalid), nullptr) << "invalid";
  EXPECT_EQ(dev::window_bytes(call_of(dev::kAllgather, 9, send, recv)), 72U);
  EXPECT_EQ(dev::window_bytes(call_of(dev::kReduceScatter, 9, send, recv)), 72U);
  EXPECT_EQ(dev::window_bytes(call_of(dev::kBroadcast, 9, nullptr, recv)), 36U);
}

// Every rank must pass the same window and offset: ranks that differ all
// fail after the first step, with every buffer as it was, and stay in step;
// a rank that zero-copies against one that stages is such a difference.
TEST(CollDeviceAlgo, ZeroCopyRanksThatDisagreeOnWhereAllGetEinvalWithBuffersUntouched) {
  Node node(3, 1024, 2);
  node.one_shot_max = 64;
  std::vector<std::vector<float>> bufs(3, std::vector<float>(256, 1.0F));
  std::vector<unsigned char*> window;
  for (auto& b : bufs) {
    window.push_back(reinterpret_cast<unsigned char*>(b.data()));
  }
  const auto rc = on_threads(3, [&](int rank) {
    float* buf = bufs[static_cast<size_t>(rank)].data();
    uint64_t status = 0;
    Args q{dev::kAllreduce, TRAINIT_F32, TRAINIT_SUM, 0, 256, buf, buf};
    q.window = &window;
    q.where = dev::window_where(0, rank == 1 ? 64 : 0);
    const int offsets = call(node, rank, q, &status);
    q.where = rank == 2 ? 0 : dev::window_where(0, 0);
    const int staged = call(node, rank, q, &status);
    const bool untouched = buf[0] == 1.0F && buf[255] == 1.0F;
    q.where = dev::window_where(0, 0);
    const int agreed = call(node, rank, q, &status);
    return offsets == -EINVAL && staged == -EINVAL && untouched && agreed == 0 && buf[255] == 3.0F ? 0 : 1;
  });
  EXPECT_EQ(rc, std::vector<int>({0, 0, 0}));
}

// An allreduce in place runs zero copy's two steps, one out of place with
// its send in the window the staged two-shot's: ranks that mix them, their
// buffers at the same place in the window, differ, and all get -EINVAL
// after the first step with every buffer as it was, and stay in step.
TEST(CollDeviceAlgo, AnAllreduceInPlaceAgainstOneOutOfPlaceInTheSameWindowIsEinvalOnEveryRank) {
  Node node(3, 1024, 2);
  node.one_shot_max = 64;
  node.timeout_ns = 5'000'000'000;  // a mistake here would be a wait for good
  std::vector<std::vector<float>> sends(3, std::vector<float>(4096, 1.0F));
  std::vector<std::vector<float>> recvs(3, std::vector<float>(4096, 0.0F));
  std::vector<unsigned char*> window;
  for (auto& b : sends) {
    window.push_back(reinterpret_cast<unsigned char*>(b.data()));
  }
  const auto rc = on_threads(3, [&](int rank) {
    const auto r = static_cast<size_t>(rank);
    uint64_t status = 0;
    void* recv = rank == 1 ? static_cast<void*>(sends[r].data()) : recvs[r].data();
    Args q{dev::kAllreduce, TRAINIT_F32, TRAINIT_SUM, 0, 4096, sends[r].data(), recv};
    q.window = &window;
    q.where = dev::window_where(0, 0);
    const int mixed = call(node, rank, q, &status);
    const bool untouched = std::count(sends[r].begin(), sends[r].end(), 1.0F) == 4096 &&
                           std::count(recvs[r].begin(), recvs[r].end(), 0.0F) == 4096;
    q.recv = recvs[r].data();
    const int agreed = call(node, rank, q, &status);
    return mixed == -EINVAL && untouched && agreed == 0 && recvs[r][4095] == 3.0F ? 0 : mixed != 0 ? mixed : 1;
  });
  EXPECT_EQ(rc, std::vector<int>({0, 0, 0}));
}

// An allgather out of place writes every rank's recv, its peers' parts
// included: nothing is written before the ranks agree where, so ranks that
// differ leave every recv as it was.
TEST(CollDeviceAlgo, ZeroCopyAllgatherRanksThatDisagreeOnWhereAllGetEinvalWithEveryRecvUntouched) {
  Node node(3, 1024, 2);
  node.one_shot_max = 64;
  std::vector<std::vector<float>> sends(3, std::vector<float>(256, 2.0F));
  std::vector<std::vector<float>> recvs(3, std::vector<float>(3 * 256, 1.0F));
  std::vector<unsigned char*> window;
  for (auto& b : recvs) {
    window.push_back(reinterpret_cast<unsigned char*>(b.data()));
  }
  const auto rc = on_threads(3, [&](int rank) {
    const auto r = static_cast<size_t>(rank);
    uint64_t status = 0;
    Args q{dev::kAllgather, TRAINIT_F32, TRAINIT_SUM, 0, 256, sends[r].data(), recvs[r].data()};
    q.window = &window;
    q.where = dev::window_where(0, rank == 2 ? 1024 : 0);
    return call(node, rank, q, &status);
  });
  EXPECT_EQ(rc, std::vector<int>({-EINVAL, -EINVAL, -EINVAL}));
  for (const auto& recv : recvs) {
    EXPECT_EQ(std::count(recv.begin(), recv.end(), 1.0F), 3 * 256);
  }
}

// All ranks together, per byte reduced: 3N - 2 bytes of memory (every
// buffer's share read by its folder, written into ranks 0 and 1's as it
// folds, then copied into the N - 2 others'), where staging moves 5N - 2;
// for two ranks the least an allreduce in place can move, every buffer read
// once and written once. Out of place, with the sends in windows, no input
// is staged: each rank folds its share from every send where it lies into
// its staging and its recv, and the others copy it out: N + 2 to fold,
// 2(N - 1) to copy out, 3N.
TEST(CollDeviceAlgo, ZeroCopyMovesThreeNMinusTwoBytesPerByteWhereStagingMovesFiveNMinusTwo) {
  for (const int n : {2, 3, 4}) {
    for (const bool in_place : {true, false}) {
      const auto un = static_cast<size_t>(n);
      const uint64_t count = 1001;
      Node node(n, 1024, 2);
      node.one_shot_max = 64;
      std::vector<std::vector<float>> sends(un, std::vector<float>(count, 1.0F));
      std::vector<std::vector<float>> recvs(un, std::vector<float>(count, 0.0F));
      std::vector<unsigned char*> window;
      for (auto& b : sends) {
        window.push_back(reinterpret_cast<unsigned char*>(b.data()));
      }
      std::vector<uint64_t> moved(un, 0);
      (void)on_threads(n, [&](int rank) {
        const auto r = static_cast<size_t>(rank);
        float* recv = in_place ? sends[r].data() : recvs[r].data();
        Args q{dev::kAllreduce, TRAINIT_F32, TRAINIT_SUM, 0, count, sends[r].data(), recv};
        q.where = dev::window_where(0, 0);
        q.window = &window;
        moved[r] = traffic_of_call(node, rank, q);
        return 0;
      });
      uint64_t all = 0;
      for (size_t r = 0; r < un; ++r) {
        all += moved[r];
        const std::vector<float>& result = in_place ? sends[r] : recvs[r];
        EXPECT_EQ(result[0], static_cast<float>(n)) << n << " ranks, rank " << r;
        EXPECT_EQ(result[count - 1], static_cast<float>(n)) << n << " ranks, rank " << r;
      }
      const uint64_t per_byte = in_place ? 3 * n - 2 : 3 * n;
      EXPECT_EQ(all, count * sizeof(float) * per_byte) << n << " ranks" << (in_place ? ", in place" : "");
    }
  }
}

// Per rank, in bytes of memory per byte of a part (C): an allgather in
// place copies its part into the N - 1 other buffers, 2(N - 1) C (out of
// place into its own too, 2N C); a reduce_scatter reads its segment of
// every buffer and writes its result, (N + 1) C; a broadcast's non-root
// copies the root's buffer into its own, 2C, and the root moves nothing.
// Staged, each also went through staging (an allgather in place 2N C, a
// reduce_scatter 3N - 1).
TEST(CollDeviceAlgo, ZeroCopyAllgatherReduceScatterAndBroadcastMoveOnlyWhatTheirResultsNeed) {
  for (const int n : {2, 3, 4}) {
    const auto un = static_cast<size_t>(n);
    const uint64_t count = 1001;
    const uint64_t part = count * sizeof(float);
    Node node(n, 1024, 2);
    node.one_shot_max = 64;
    struct Case {
      uint32_t kind;
      bool in_place;
      uint64_t (*bytes)(int n, int rank, uint64_t part);
    };
    const Case cases[] = {
        {dev::kAllgather, true, [](int k, int, uint64_t c) { return 2 * static_cast<uint64_t>(k - 1) * c; }},
        {dev::kAllgather, false, [](int k, int, uint64_t c) { return 2 * static_cast<uint64_t>(k) * c; }},
        {dev::kReduceScatter, false, [](int k, int, uint64_t c) { return static_cast<uint64_t>(k + 1) * c; }},
        {dev::kBroadcast, true, [](int, int rank, uint64_t c) { return rank == 0 ? 0 : 2 * c; }},
    };
    for (const Case& k : cases) {
      std::vector<std::vector<float>> sends(un, std::vector<float>(count * un, 1.0F));
      std::vector<std::vector<float>> recvs(un, std::vector<float>(count * un, 1.0F));
      std::vector<unsigned char*> window;
      for (size_t r = 0; r < un; ++r) {
        window.push_back(
            reinterpret_cast<unsigned char*>(k.kind == dev::kReduceScatter ? sends[r].data() : recvs[r].data()));
      }
      std::vector<uint64_t> moved(un, 0);
      (void)on_threads(n, [&](int rank) {
        const auto r = static_cast<size_t>(rank);
        const void* send = k.kind == dev::kBroadcast ? nullptr : k.in_place ? recvs[r].data() : sends[r].data();
        Args q{k.kind, TRAINIT_F32, TRAINIT_SUM, 0, count, send, recvs[r].data()};
        q.where = dev::window_where(0, 0);
        q.window = &window;
        moved[r] = traffic_of_call(node, rank, q);
        return 0;
      });
      for (int r = 0; r < n; ++r) {
        EXPECT_EQ(moved[static_cast<size_t>(r)], k.bytes(n, r, part))
            << n << " ranks, kind " << k.kind << (k.in_place ? " in place" : "") << ", rank " << r;
      }
      if (k.kind == dev::kReduceScatter) {
        EXPECT_EQ(recvs[un - 1][count - 1], static_cast<float>(n)) << n << " ranks";
      }
      if (k.kind == dev::kAllgather && k.in_place) {  // staged: its part into staging first, 2N C
        (void)on_threads(n, [&](int rank) {
          const auto r = static_cast<size_t>(rank);
          moved[r] = traffic_of_call(node, rank,
                                     {k.kind, TRAINIT_F32, TRAINIT_SUM, 0, count, recvs[r].data(), recvs[r].data()});
          return 0;
        });
        EXPECT_EQ(moved[0], 2 * static_cast<uint64_t>(n) * part) << n << " ranks, staged allgather in place";
      }
    }
  }
}

TEST(CollDeviceAlgo, ZeroCopyWithAPeerThatNeverComesEndsWithEtimedoutAndTheBufferUntouched) {
  Node node(2, 1024, 2);
  node.one_shot_max = 64;
  node.timeout_ns = 50'000'000;
  std::vector<float> mine(256, 1.0F);
  std::vector<float> theirs(256, 2.0F);
  std::vector<unsigned char*> window{reinterpret_cast<unsigned char*>(mine.data()),
                                     reinterpret_cast<unsigned char*>(theirs.data())};
  Args q{dev::kAllreduce, TRAINIT_F32, TRAINIT_SUM, 0, 256, mine.data(), mine.data()};
  q.where = dev::window_where(0, 0);
  q.window = &window;
  uint64_t status = 0;
  EXPECT_EQ(call(node, 0, q, &status), -ETIMEDOUT);
  EXPECT_EQ(status, dev::status_of(1, -ETIMEDOUT));
  EXPECT_EQ(mine[0], 1.0F);
  EXPECT_EQ(theirs[255], 2.0F);
}

}  // namespace
