// Pass: the anchor's mainloop, in the precision the graph asks for: bf16 /
// f16 operands natively, f32 in tf32 mode as TF32, f32 in fp32 mode as
// 3xTF32 (fp32-accurate).
// - On sm_90a a linear anchor whose operands TMA can read (K-major, rows of
//   16-byte multiples) runs on the wgmma pipeline.
// - On sm_80 and sm_90a a conv2d anchor runs on mma.sync with an im2col
//   gather (cp.async) into swizzled shared memory.
// Everything else keeps the SIMT FFMA mainloop, with a note saying why.
// `mainloop=ffma` (or a SIMT `tile=`) in the config forces SIMT;
// `mainloop=wgmma` / `mainloop=mma` make ineligibility an error.
#include <cstdlib>

#include "compiler/passes.h"

namespace fusejit::cg {
namespace {

// The fj::MmaKind for the anchor's operands, or "" with `why` set.
std::string mma_kind(const Graph& g, const Node& anchor, std::string& why) {
  const DType a = g.node(anchor.operands[0]).type.dtype, b = g.node(anchor.operands[1]).type.dtype;
  if (a != b) {
    why = "its operands have different dtypes";
    return "";
  }
  if (a == DType::BF16) return "bf16";
  if (a == DType::F16) return "f16";
  if (g.precision == Precision::TF32) return "tf32";
  if (g.precision == Precision::FP32) return "f32x3";
  why = "its operands are f32 in a " + std::string(precision_name(g.precision)) + " graph";
  return "";
}

constexpr int64_t kMinKFor3xTf32Conv = 256;

const char* kind_text(const std::string& kind) {
  return kind == "f32x3" ? "3xTF32 (fp32-accurate: hi*hi + hi*lo + lo*hi)"
         : kind == "tf32" ? "TF32 operands, fp32 accumulation"
                          : "fp32 accumulation";
}

}  // namespace

Status choose_mainloop(PlanContext& ctx, Plan& plan) {
  KernelPlan& kp = plan.kernels[0];
  const Node& a = ctx.node(kp.root);
  if (ctx.heur.mainloop == "ffma" || (ctx.heur.mainloop == "auto" && ctx.heur.tile)) {
    kp.notes.push_back(std::string("mainloop: SIMT FFMA (") +
                       (ctx.heur.tile ? "the config sets its tile" : "mainloop=ffma in the config") + ")");
    return Status::success();
  }
  if (ctx.heur.tile)
    return Error("codegen config: tile= sets the SIMT mainloop's tile, but mainloop=" + ctx.heur.mainloop);
  std::string why, kind;
  const bool sm80_up = ctx.arch.rfind("sm_", 0) == 0 && std::atoi(ctx.arch.c_str() + 3) >= 80;
  if (a.op == OpKind::Conv2d || ctx.heur.mainloop == "mma") {
    if (a.op != OpKind::Conv2d)
      why = std::string(op_name(a.op)) + " is not on the mma.sync path yet (conv2d is)";
    else if (!sm80_up)
      why = "the target is " + ctx.arch + ", and mma.sync needs sm_80 or newer";
    else if (ctx.heur.mainloop == "wgmma")
      why = "conv2d runs on mma.sync, not wgmma";
    else
      kind = mma_kind(ctx.g, a, why);
    // 3xTF32 runs three mmas per product and the gather is the same: with a
    // short K (little reuse per gathered element) FFMA is faster (H100, seed 3,
    // K=72: 5.59 vs 4.19 ms; seed 1, K=576: 7.57 vs 9.91 ms).
    const int64_t k = analyze_anchor(ctx.g, kp.root).k;
    if (kind == "f32x3" && ctx.heur.mainloop == "auto" && k < kMinKFor3xTf32Conv) {
      kp.notes.push_back("mainloop: SIMT FFMA, not mma.sync 3xTF32: K=" + std::to_string(k) + " is below " +
                         std::to_string(kMinKFor3xTf32Conv) + ", where FFMA is faster (mainloop=mma forces it)");
      return Status::success();
    }
    if (kind.empty()) {
      if (ctx.heur.mainloop != "auto") return Error("codegen config: mainloop=" + ctx.heur.mainloop + ", but " + why);
      kp.notes.push_back("mainloop: SIMT FFMA, not mma.sync: " + why);
      return Status::success();
    }
    kp.mainloop = Mainloop::Mma;
    kp.mma_kind = kind;
    kp.notes.push_back("mainloop: mma.sync " + kind + " (" + kind_text(kind) +
                       "), im2col gather by cp.async into a swizzled shared-memory ring");
    return Status::success();
  }
  if (ctx.arch != "sm_90a") {
    why = "the target is " + ctx.arch + ", not sm_90a";
  } else if (a.op != OpKind::Linear) {
    why = std::string(op_name(a.op)) + " is not on the wgmma path yet (it takes K-major operands: linear)";
  } else {
    kind = mma_kind(ctx.g, a, why);
    const AnchorGeometry geo = analyze_anchor(ctx.g, kp.root);
    const int elem_bytes = kind == "bf16" || kind == "f16" ? 2 : 4;
    if (!kind.empty() && (geo.k * elem_bytes) % 16) {
      why = "TMA needs rows of a multiple of 16 bytes and K=" + std::to_string(geo.k) + " gives " +
            std::to_string(geo.k * elem_bytes);
      kind.clear();
    }
  }
  if (kind.empty()) {
    if (ctx.heur.mainloop == "wgmma") return Error("codegen config: mainloop=wgmma, but " + why);
    kp.notes.push_back("mainloop: SIMT FFMA, not wgmma: " + why);
    return Status::success();
  }
  kp.mainloop = Mainloop::Wgmma;
  kp.mma_kind = kind;
  kp.notes.push_back("mainloop: wgmma " + kind + " (" + kind_text(kind) + "), TMA loads, warp-specialized, persistent");
  return Status::success();
}

}  // namespace fusejit::cg
