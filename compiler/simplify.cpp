// simplify_graph: runs the simplification passes (simplify_passes.h) to a
// fixed point, re-preparing the graph after each, and checks that the kernel
// ABI (inputs and outputs) is what it was. Also the Rewriter they share.
#include "compiler/simplify.h"

#include <sstream>

#include "compiler/simplify_passes.h"

namespace fusejit {
namespace simplify {

Rewriter::Rewriter(const Graph& old, std::vector<std::string>* notes)
    : old_(old),
      notes_(notes),
      map_(old.nodes.size(), -1),
      is_output_(old.nodes.size(), false),
      anchored_(old.anchor().has_value()) {
  out_.name = old.name;
  out_.precision = old.precision;
  out_.outputs = old.outputs;
  for (const Output& o : old.outputs) is_output_.at(static_cast<size_t>(o.value)) = true;
}

ValueId Rewriter::emit(Node n) {
  bool anchored = is_anchor(n.op);
  for (ValueId o : n.operands) anchored = anchored || from_anchor_.at(static_cast<size_t>(o));
  from_anchor_.push_back(anchored);
  output_target_.push_back(false);
  return out_.add(std::move(n));
}

ValueId Rewriter::emit_constant(double value, const SourceLoc& loc) {
  Node n;
  n.op = OpKind::Constant;
  n.attrs["value"] = value;
  n.type = TensorType{DType::F32, {}};
  n.loc = loc;
  return emit(std::move(n));
}

ValueId Rewriter::emit_op(OpKind op, std::vector<ValueId> operands, const TensorType& type, const SourceLoc& loc,
                          AttrMap attrs, std::string name) {
  Node n;
  n.op = op;
  n.operands = std::move(operands);
  n.attrs = std::move(attrs);
  n.type = type;
  n.loc = loc;
  n.name = std::move(name);
  return emit(std::move(n));
}

bool Rewriter::can_replace(ValueId v, ValueId w) const {
  if (w < 0 || static_cast<size_t>(w) >= out_.nodes.size()) return false;
  const Node& to = out_.node(w);
  if (to.type != old_.node(v).type) return false;
  if (!is_output_.at(static_cast<size_t>(v))) return true;
  const auto i = static_cast<size_t>(w);
  return !output_target_[i] && (from_anchor_[i] || !anchored_) && to.op != OpKind::Input &&
         to.op != OpKind::Constant;
}

bool Rewriter::is_constant(ValueId w, double* value) const {
  const Node& n = out_.node(w);
  if (n.op != OpKind::Constant) return false;
  if (value) *value = n.constant_value();
  return true;
}

void Rewriter::note(const std::string& text) {
  if (notes_) notes_->push_back("simplify: " + text);
}

bool from_anchor(const Graph& g, ValueId v) {
  std::vector<ValueId> stack = {v};
  std::vector<bool> seen(g.nodes.size(), false);
  while (!stack.empty()) {
    const ValueId u = stack.back();
    stack.pop_back();
    if (seen[static_cast<size_t>(u)]) continue;
    seen[static_cast<size_t>(u)] = true;
    if (is_anchor(g.node(u).op)) return true;
    stack.insert(stack.end(), g.node(u).operands.begin(), g.node(u).operands.end());
  }
  return false;
}

}  // namespace simplify

namespace {

using PassFn = bool (*)(const Graph&, Graph&, std::vector<std::string>*);
struct Pass {
  const char* name;
  PassFn run;
};
constexpr Pass kPasses[] = {
    {"size-1 dims", simplify::fold_size1_dims},
    {"layout", simplify::fold_layout},
    {"constants", simplify::fold_constants},
    {"algebra", simplify::fold_algebra},
    {"pool backward sums", simplify::fold_pool_backward_sums},
    {"softmax beside logsumexp", simplify::fold_normalize_into_logsumexp},
    {"reductions split at the rows", simplify::split_reductions_along_rows},
    {"reshapes after elementwise ops", simplify::sink_reshapes},
    {"cse", simplify::eliminate_common_subexpressions},
};
constexpr int kMaxRounds = 8;  // each round shrinks the graph; real graphs settle in 2-3

// The kernel ABI: inputs (order, names, types, init) and outputs (order,
// names, dtypes, shapes).
Status check_abi(const Graph& a, const Graph& b) {
  const std::vector<ValueId> ia = a.inputs(), ib = b.inputs();
  if (ia.size() != ib.size()) return Error("the input count changed");
  for (size_t k = 0; k < ia.size(); ++k) {
    const Node& x = a.node(ia[k]);
    const Node& y = b.node(ib[k]);
    if (x.name != y.name || x.type != y.type || x.init != y.init || x.init_fan_in != y.init_fan_in)
      return Error("input " + std::to_string(k) + " '" + x.name + "' changed");
  }
  if (a.outputs.size() != b.outputs.size()) return Error("the output count changed");
  for (size_t k = 0; k < a.outputs.size(); ++k)
    if (a.outputs[k].name != b.outputs[k].name ||
        a.node(a.outputs[k].value).type != b.node(b.outputs[k].value).type)
      return Error("output " + std::to_string(k) + " '" + a.outputs[k].name + "' changed");
  return {};
}

size_t op_count(const Graph& g) {
  size_t n = 0;
  for (const Node& node : g.nodes) n += node.op != OpKind::Input && node.op != OpKind::Constant;
  return n;
}

// simplify_graph after verify_graph.
Graph simplify_verified(const Graph& prepared, std::vector<std::string>* notes) {
  Graph g = prepared;
  std::vector<std::string> done;
  bool any = false;
  for (int round = 0; round < kMaxRounds; ++round) {
    bool changed = false;
    for (const Pass& pass : kPasses) {
      Graph next;
      std::vector<std::string> pass_notes;
      if (!pass.run(g, next, &pass_notes)) continue;
      simplify::remove_dead_values(next);
      if (Status s = prepare_graph(next); !s) {  // a pass bug: plan the graph as written
        if (notes) notes->push_back(std::string("simplify: off (the ") + pass.name + " pass made an invalid graph: " +
                                    s.error().message + ")");
        return prepared;
      }
      g = std::move(next);
      done.insert(done.end(), pass_notes.begin(), pass_notes.end());
      changed = any = true;
    }
    if (!changed) break;
  }
  if (!any) return prepared;
  if (Status s = check_abi(prepared, g); !s) {
    if (notes) notes->push_back("simplify: off (" + s.error().message + ")");
    return prepared;
  }
  if (notes) {
    notes->insert(notes->end(), done.begin(), done.end());
    notes->push_back("simplify: " + std::to_string(op_count(prepared)) + " ops -> " + std::to_string(op_count(g)) +
                     " (inputs and constants not counted)");
  }
  return g;
}

}  // namespace

Expected<Graph> simplify_graph(const Graph& prepared, std::vector<std::string>* notes) {
  if (Status s = verify_graph(prepared); !s) return Error("simplify needs a prepared graph: " + s.error().str());
  return simplify_verified(prepared, notes);
}

Expected<SimplifiedGraph> simplify_for_codegen(const Graph& g, const std::string& config) {
  if (Status s = verify_graph(g); !s) return Error("codegen needs a prepared graph: " + s.error().str());
  std::string text = config;
  for (char& c : text)
    if (c == ',' || c == ';') c = ' ';
  std::istringstream in(text);
  bool on = true;
  for (std::string item; in >> item;) {
    if (item == "simplify=0") on = false;
    if (item == "simplify=1") on = true;
  }
  SimplifiedGraph out;
  Graph lowered;
  bool changed = false;
  if (Status s = simplify::lower_batch_norms(g, lowered, changed, &out.notes); !s) return s.error();
  const Graph& planned = changed ? lowered : g;
  out.graph = on ? simplify_verified(planned, &out.notes) : planned;
  return out;
}

}  // namespace fusejit
