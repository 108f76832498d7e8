// CPU: the ping-pong schedule's `turn` protocol (gemm_wgmma.cuh's
// wgmma_mainloop, conv_wgmma_halo.cuh), as a model checked over every
// interleaving of its warps. Two consumers take a block's units in turn
// (local 0, 2, ... and 1, 3, ...); before unit `local` > 0 each warp of
// consumer c waits on turn[c] for parity ((local - 1) / 2) & 1, at the unit's
// last k-tile it arrives on turn[1 - c], then runs the epilogue (two named
// barriers over the consumer's warps, then stores: the direct epilogue's
// shape, whose warps leave it apart). One k-tile a unit, as in the H100 hang
// of session 48 (f16 512x64x11000, two units a consumer).
//
// Only the turn barriers are modeled (the stage ring's empty barriers take an
// arrival from every reading warp already). mbarrier semantics (PTX ISA, mbarrier.try_wait.parity): a phase completes
// when its pending arrivals reach zero; a wait for parity P passes while the
// current (incomplete) phase's parity differs from P.
#include <gtest/gtest.h>

#include <set>
#include <vector>

namespace fusejit {
namespace {

struct Barrier {
  int count = 1, pending = 1, phase = 0;  // phase: completed phases so far
  void arrive() {
    if (--pending == 0) {
      ++phase;
      pending = count;
    }
  }
  bool passed(int parity) const { return (phase & 1) != parity; }
  auto key() const { return std::make_pair(pending, phase); }
};

struct Warp {
  int consumer = 0, unit = 0, step = 0;  // unit: this consumer's k-th unit; step: in the unit's program (Step)
  int syncs = 0;                         // named-barrier arrivals so far
};

// The per-unit program of a warp: wait turn, arrive, two named barriers (arrive, wait), stores.
enum Step { kWaitTurn, kArriveTurn, kSyncArrive1, kSyncWait1, kSyncArrive2, kSyncWait2, kStores, kSteps };

struct Model {
  int warps_per_consumer;
  int units;        // the block's units (consumer c takes locals c, c + 2, ...)
  bool every_warp;  // true: every warp arrives on turn (count = warps); false: warp 0 only (count 1)
  Barrier turn[2];
  std::vector<Warp> warps;

  Model(int w, int u, bool all) : warps_per_consumer(w), units(u), every_warp(all) {
    for (Barrier& b : turn) b.count = b.pending = all ? w : 1;
    for (int c = 0; c < 2; ++c)
      for (int i = 0; i < w; ++i) warps.push_back({c, 0, 0, 0});
  }
  int local(const Warp& x) const { return 2 * x.unit + x.consumer; }
  bool done(const Warp& x) const { return local(x) >= units; }
  // Whether warp i can take its next step now.
  bool ready(size_t i) const {
    const Warp& x = warps[i];
    if (done(x)) return false;
    if (x.step == kWaitTurn) {  // before every unit but the block's first
      const int l = local(x);
      return l == 0 || turn[x.consumer].passed(((l - 1) / 2) & 1);
    }
    if (x.step == kSyncWait1 || x.step == kSyncWait2) {  // every warp of the consumer has arrived
      for (const Warp& y : warps)
        if (y.consumer == x.consumer && y.syncs < x.syncs) return false;
    }
    return true;
  }
  void take(size_t i) {
    Warp& x = warps[i];
    if (x.step == kArriveTurn && (every_warp || static_cast<int>(i) % warps_per_consumer == 0))
      turn[1 - x.consumer].arrive();  // at the unit's last k-tile
    if (x.step == kSyncArrive1 || x.step == kSyncArrive2) ++x.syncs;
    if (++x.step == kSteps) {
      x.step = kWaitTurn;
      ++x.unit;
    }
  }
  std::vector<int> key() const {
    std::vector<int> k;
    for (const Barrier& b : turn) k.insert(k.end(), {b.key().first, b.key().second});
    for (const Warp& w : warps) k.insert(k.end(), {w.unit, w.step, w.syncs});
    return k;
  }
};

// Every reachable state; true when one has unfinished warps and none can step.
bool can_deadlock(const Model& start) {
  std::set<std::vector<int>> seen;
  std::vector<Model> stack{start};
  while (!stack.empty()) {
    Model m = stack.back();
    stack.pop_back();
    if (!seen.insert(m.key()).second) continue;
    bool all_done = true, moved = false;
    for (size_t i = 0; i < m.warps.size(); ++i) {
      all_done = all_done && m.done(m.warps[i]);
      if (!m.ready(i)) continue;
      Model next = m;
      next.take(i);
      moved = true;
      stack.push_back(std::move(next));
    }
    if (!all_done && !moved) return true;
  }
  return false;
}

TEST(PingPongProtocol, OneArrivalAConsumerCanDeadlock) {
  // A lagging warp meets turn two phases on: with 4 units (the H100 hang) one of consumer 0 still storing its first
  // tile; with 3, one of consumer 1 that has not reached its first wait yet (rarer: no epilogue before it).
  EXPECT_TRUE(can_deadlock(Model(2, 4, false)));
  EXPECT_TRUE(can_deadlock(Model(4, 4, false)));
  EXPECT_TRUE(can_deadlock(Model(2, 3, false)));
  EXPECT_FALSE(can_deadlock(Model(2, 2, false))) << "two units: each turn completes one phase at most";
}

TEST(PingPongProtocol, AnArrivalPerWarpNeverDeadlocks) {
  for (int warps : {1, 2, 4})
    for (int units = 1; units <= (warps < 4 ? 6 : 4); ++units)  // (4 warps, 5+ units: slow to enumerate)
      EXPECT_FALSE(can_deadlock(Model(warps, units, true))) << warps << " warps, " << units << " units";
}

}  // namespace
}  // namespace fusejit
