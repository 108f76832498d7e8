// Attribute checks that need no shapes, plus defaults.
#include "ir/passes.h"

namespace fusejit {
namespace {

// Coerces `v` to the spec's kind (int -> float, int -> pair); false if impossible.
bool coerce(AttrValue& v, AttrKind kind) {
  switch (kind) {
    case AttrKind::Int: return std::holds_alternative<int64_t>(v);
    case AttrKind::Float:
      if (auto* i = std::get_if<int64_t>(&v)) v = static_cast<double>(*i);
      return std::holds_alternative<double>(v);
    case AttrKind::Bool: return std::holds_alternative<bool>(v);
    case AttrKind::String: return std::holds_alternative<std::string>(v);
    case AttrKind::Ints:
      if (auto* i = std::get_if<int64_t>(&v)) v = std::vector<int64_t>{*i};
      return std::holds_alternative<std::vector<int64_t>>(v);
    case AttrKind::Pair:
      if (auto* i = std::get_if<int64_t>(&v)) v = std::vector<int64_t>{*i, *i};
      if (auto* xs = std::get_if<std::vector<int64_t>>(&v)) {
        if (xs->size() == 1) v = std::vector<int64_t>{(*xs)[0], (*xs)[0]};
        return std::get<std::vector<int64_t>>(v).size() == 2;
      }
      return false;
  }
  return false;
}

Status check_min(const Graph& g, ValueId id, const std::string& key, int64_t lo) {
  const Node& n = g.node(id);
  auto it = n.attrs.find(key);
  if (it == n.attrs.end()) return {};
  std::vector<int64_t> xs;
  if (auto* i = std::get_if<int64_t>(&it->second)) xs = {*i};
  if (auto* v = std::get_if<std::vector<int64_t>>(&it->second)) xs = *v;
  for (int64_t x : xs)
    if (x < lo)
      return node_error(g, id, "'" + key + "' must be " + (lo == 0 ? "non-negative" : ">= " + std::to_string(lo)) +
                                   ", got " + attr_str(it->second));
  return {};
}

}  // namespace

Error node_error(const Graph& g, ValueId id, const std::string& msg) {
  return Error(g.describe(id) + ": " + msg, g.node(id).loc);
}

Status normalize_attrs(Graph& g) {
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    ValueId id = static_cast<ValueId>(i);
    Node& n = g.nodes[i];
    const OpInfo& info = op_info(n.op);
    for (auto& [key, value] : n.attrs) {
      const AttrSpec* spec = info.find_attr(key);
      if (!spec) {
        std::string known;
        for (const auto& a : info.attrs) known += (known.empty() ? "" : ", ") + a.name;
        return node_error(g, id, "unknown attribute '" + key + "' (" +
                                     (known.empty() ? std::string("it takes none") : "it takes: " + known) + ")");
      }
      if (!coerce(value, spec->kind))
        return node_error(g, id, "'" + key + "' must be " + attr_kind_phrase(spec->kind) + ", got " +
                                     attr_str(value));
    }
    for (const auto& spec : info.attrs) {
      if (n.attrs.count(spec.name)) continue;
      if (spec.required) return node_error(g, id, "missing required attribute '" + spec.name + "'");
      if (spec.default_value) n.attrs[spec.name] = *spec.default_value;
    }
    if ((info.category == OpCategory::Pool || info.category == OpCategory::Gather) && info.find_attr("stride") &&
        !n.attrs.count("stride"))
      n.attrs["stride"] = n.attrs.at("kernel_size");
    for (const char* key : {"kernel_size", "stride", "dilation", "groups", "num_groups", "normalized_shape"})
      if (Status s = check_min(g, id, key, 1); !s) return s;
    if (Status s = check_min(g, id, "padding", 0); !s) return s;
    if (n.op == OpKind::Gelu) {
      const std::string& a = n.attr_string("approximate");
      if (a != "none" && a != "tanh")
        return node_error(g, id, "'approximate' must be \"none\" or \"tanh\", got \"" + a + "\"");
    }
    if (n.op == OpKind::Cast) {  // stored canonical ("float16" -> "f16"): prints and hashes alike
      const std::optional<DType> dt = parse_dtype(n.attr_string("dtype"));
      if (!dt)
        return node_error(g, id, "'dtype' must be \"f32\", \"bf16\" or \"f16\", got \"" + n.attr_string("dtype") +
                                     "\"");
      n.attrs["dtype"] = std::string(dtype_name(*dt));
    }
    if (n.op == OpKind::Clamp || n.op == OpKind::Hardtanh) {
      const char* lo = n.op == OpKind::Clamp ? "min" : "min_val";
      const char* hi = n.op == OpKind::Clamp ? "max" : "max_val";
      if (n.attr_float(lo) > n.attr_float(hi))
        return node_error(g, id, std::string("'") + lo + "' (" + attr_str(n.attrs.at(lo)) + ") is greater than '" +
                                     hi + "' (" + attr_str(n.attrs.at(hi)) + ")");
    }
    if (info.find_attr("eps") && !(n.attr_float("eps") >= 0.0))
      return node_error(g, id, "'eps' must be non-negative, got " + attr_str(n.attrs.at("eps")));
    if (n.op == OpKind::LayerNorm && n.attr_ints("normalized_shape").empty())
      return node_error(g, id, "'normalized_shape' must name at least one dim");
    if (n.op == OpKind::Softplus && n.attr_float("beta") == 0.0)
      return node_error(g, id, "'beta' must not be 0");
  }
  return {};
}

}  // namespace fusejit
