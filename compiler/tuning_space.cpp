#include "compiler/tuning_space.h"

#include "compiler/plan.h"

namespace fusejit {

std::vector<std::string> tuning_candidates(const Graph& g) {
  std::vector<std::string> out{""};
  auto anchor = g.anchor();
  if (!anchor) return out;
  const cg::AnchorGeometry geo = cg::analyze_anchor(g, *anchor);
  for (int bm : {32, 64, 128, 256}) {
    if (bm > 2 * geo.m && bm > 32) continue;  // mostly idle rows
    for (int bn : {16, 32, 64, 128, 256}) {
      if (bn > 2 * geo.n && bn > 16) continue;
      for (int tm : {4, 8}) {
        for (int tn : {4, 8}) {
          cg::TileConfig t;
          t.bm = bm;
          t.bn = bn;
          t.tm = tm;
          t.tn = tn;
          if (!cg::validate_tile(t) || t.threads() < 64 || t.threads() > 512) continue;
          out.push_back("tile=" + std::to_string(bm) + "x" + std::to_string(bn) + "x" + std::to_string(tm) + "x" +
                        std::to_string(tn));
        }
      }
    }
  }
  return out;
}

}  // namespace fusejit
