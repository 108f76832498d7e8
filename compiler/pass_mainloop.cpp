// Pass: the anchor's mainloop. On sm_90a a linear anchor whose operands TMA
// can read (K-major, rows of 16-byte multiples) runs on the wgmma pipeline in
// the precision the graph asks for: bf16 / f16 operands natively, f32 in tf32
// mode as TF32, f32 in fp32 mode as 3xTF32 (fp32-accurate). Everything else
// keeps the SIMT FFMA mainloop, with a note saying why. `mainloop=ffma` (or a
// SIMT `tile=`) in the config forces SIMT; `mainloop=wgmma` makes
// ineligibility an error.
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

}  // namespace

Status choose_mainloop(PlanContext& ctx, Plan& plan) {
  KernelPlan& kp = plan.kernels[0];
  const Node& a = ctx.node(kp.root);
  if (ctx.heur.mainloop == "ffma" || (ctx.heur.mainloop == "auto" && ctx.heur.tile)) {
    kp.notes.push_back(std::string("mainloop: SIMT FFMA (") +
                       (ctx.heur.tile ? "the config sets its tile" : "mainloop=ffma in the config") + ")");
    return Status::success();
  }
  if (ctx.heur.tile) return Error("codegen config: tile= sets the SIMT mainloop's tile, but mainloop=wgmma");
  std::string why, kind;
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
  const char* what = kind == "f32x3" ? "3xTF32 (fp32-accurate: hi*hi + hi*lo + lo*hi)"
                     : kind == "tf32" ? "TF32 operands, fp32 accumulation"
                                      : "fp32 accumulation";
  kp.notes.push_back("mainloop: wgmma " + kind + " (" + what + "), TMA loads, warp-specialized, persistent");
  return Status::success();
}

}  // namespace fusejit::cg
