// spec/spec_parser.cpp — YAML fusion spec -> prepared Graph.
//
// The parser checks everything that is about the text (keys, types, names,
// references) and points at the offending key or value; meaning (shapes,
// broadcasting, operand roles, dtype rules, anchors) is prepare_graph's job,
// which reports through the Node locations set here.
#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <exception>
#include <map>
#include <set>
#include <sstream>

#include <yaml-cpp/depthguard.h>
#include <yaml-cpp/eventhandler.h>

#include "fusejit/spec.h"
#include "spec/spec_attrs.h"
#include "spec/yaml_helpers.h"

namespace fusejit {
namespace {

using namespace spec_detail;

#define FUSEJIT_SPEC_TRY(expr)           \
  do {                                   \
    if (Status s_ = (expr); !s_.ok()) {  \
      return s_.error();                 \
    }                                    \
  } while (0)

const std::vector<std::string> kTopKeys = {"name", "description", "precision",
                                           "inputs", "ops", "outputs"};
const std::vector<std::string> kInputKeys = {"name", "shape", "dtype", "init"};

// Largest element count accepted for one input (keeps numel far from overflow).
constexpr int64_t kMaxNumel = int64_t{1} << 48;

std::vector<std::string> dtype_names() { return {"f32", "f16", "bf16"}; }
std::vector<std::string> precision_names() { return {"fp32", "tf32", "bf16", "f16"}; }
std::vector<std::string> init_names() {
  return {"auto", "uniform01", "normal", "torch_weight", "torch_bias"};
}

std::vector<std::string> op_names() {
  std::vector<std::string> names;
  for (const OpInfo& info : all_ops())
    if (info.category != OpCategory::Leaf) names.push_back(info.name);
  return names;
}

// Where the root node of each document starts. Used instead of YAML::LoadAll,
// which loops forever (allocating a null document per turn) on a stray ','
// at the top level in yaml-cpp <= 0.8 (jbeder/yaml-cpp#1040).
class DocumentRoots : public YAML::EventHandler {
 public:
  std::vector<YAML::Mark> roots;

  void OnDocumentStart(const YAML::Mark&) override { want_root_ = true; }
  void OnDocumentEnd() override {}
  void OnNull(const YAML::Mark& m, YAML::anchor_t) override { node(m); }
  void OnAlias(const YAML::Mark& m, YAML::anchor_t) override { node(m); }
  void OnScalar(const YAML::Mark& m, const std::string&, YAML::anchor_t, const std::string&) override { node(m); }
  void OnSequenceStart(const YAML::Mark& m, const std::string&, YAML::anchor_t, YAML::EmitterStyle::value) override {
    node(m);
  }
  void OnSequenceEnd() override {}
  void OnMapStart(const YAML::Mark& m, const std::string&, YAML::anchor_t, YAML::EmitterStyle::value) override {
    node(m);
  }
  void OnMapEnd() override {}

 private:
  bool want_root_ = false;
  void node(const YAML::Mark& m) {
    if (want_root_) roots.push_back(m);
    want_root_ = false;
  }
};

// Root marks of the first `limit` documents of `text`.
std::vector<YAML::Mark> document_roots(const std::string& text, int limit) {
  std::istringstream in(text);
  YAML::Parser parser(in);
  DocumentRoots handler;
  for (int k = 0; k < limit && parser.HandleNextDocument(handler); ++k) {
  }
  return handler.roots;
}

class SpecParser {
 public:
  explicit SpecParser(std::string file) : file_(std::move(file)) {}

  Expected<Graph> parse(std::string_view text) {
    const std::string owned(text);
    // Three documents at most: two roots at the same place mean the parser is
    // stuck on a token that cannot start a node (yaml-cpp#1040).
    std::vector<YAML::Mark> roots = document_roots(owned, 3);
    for (size_t k = 1; k < roots.size(); ++k)
      if (roots[k].pos == roots[k - 1].pos) {
        const auto pos = static_cast<size_t>(roots[k].pos);
        const std::string what = pos < owned.size() ? "'" + owned.substr(pos, 1) + "'" : "end of input";
        return Error("YAML syntax error: unexpected " + what, loc_of(roots[k], file_));
      }
    const YAML::Node root = roots.empty() ? YAML::Node() : YAML::Load(owned);
    if (root.IsNull())
      return Error("the spec is empty (expected a mapping with inputs, ops and outputs)",
                   SourceLoc{file_, 1, 1});
    if (roots.size() > 1)
      return Error("a spec file holds one YAML document; found a second one", loc_of(roots[1], file_));
    FUSEJIT_SPEC_TRY(parse_top(root));
    FUSEJIT_SPEC_TRY(prepare_graph(graph_));
    return std::move(graph_);
  }

 private:
  using Entries = std::vector<std::pair<YAML::Node, YAML::Node>>;

  Error err(const YAML::Node& at, std::string msg) const {
    return Error(std::move(msg), loc_of(at.Mark(), file_));
  }

  // The entries of a mapping; keys must be distinct scalars. `what` names the
  // map in messages ("input 'x'").
  Status entries(const YAML::Node& map, const std::string& what, Entries& out) const {
    std::map<std::string, int> first_line;
    for (auto it = map.begin(); it != map.end(); ++it) {
      const YAML::Node key = it->first;
      if (!key.IsScalar()) return err(key, what + ": keys must be plain names");
      auto [pos, fresh] = first_line.emplace(key.Scalar(), key.Mark().line + 1);
      if (!fresh)
        return err(key, what + ": duplicate key '" + key.Scalar() + "' (first given on line " +
                            std::to_string(pos->second) + ")");
      out.emplace_back(key, it->second);
    }
    return Status::success();
  }

  // Where to point for a value: the value itself, or its key when the value
  // is empty (yaml-cpp places empty values at the start of the next token).
  static const YAML::Node& value_or_key(const YAML::Node& key, const YAML::Node& value) {
    return value.IsNull() ? key : value;
  }

  Status scalar_string(const YAML::Node& key, const YAML::Node& value, const std::string& what,
                       std::string& out) const {
    if (!value.IsScalar())
      return err(value_or_key(key, value), what + ": '" + key.Scalar() + "' must be a string");
    out = value.Scalar();
    return Status::success();
  }

  Status parse_top(const YAML::Node& root) {
    if (!root.IsMap())
      return err(root, "a spec must be a YAML mapping with keys inputs, ops and outputs");
    Entries top;
    FUSEJIT_SPEC_TRY(entries(root, "spec", top));
    std::map<std::string, std::pair<YAML::Node, YAML::Node>> by_key;
    for (const auto& [key, value] : top) {
      const std::string& k = key.Scalar();
      if (std::find(kTopKeys.begin(), kTopKeys.end(), k) == kTopKeys.end())
        return err(key, "unknown top-level key '" + k + "'" + did_you_mean(k, kTopKeys) +
                            "; expected " + join_alternatives(kTopKeys));
      by_key.emplace(k, std::make_pair(key, value));
    }
    for (const char* required : {"inputs", "ops", "outputs"})
      if (!by_key.count(required))
        return err(root, std::string("missing required top-level key '") + required + "'");

    if (auto it = by_key.find("name"); it != by_key.end())
      FUSEJIT_SPEC_TRY(scalar_string(it->second.first, it->second.second, "spec", graph_.name));
    if (auto it = by_key.find("description"); it != by_key.end()) {
      std::string ignored;
      FUSEJIT_SPEC_TRY(scalar_string(it->second.first, it->second.second, "spec", ignored));
    }
    if (auto it = by_key.find("precision"); it != by_key.end())
      FUSEJIT_SPEC_TRY(parse_precision_key(it->second.first, it->second.second));

    // Errors come in reading order: inputs, then ops, then outputs.
    const auto& [inputs_key, inputs] = by_key.at("inputs");
    FUSEJIT_SPEC_TRY(parse_inputs(inputs_key, inputs));
    const auto& [ops_key, ops] = by_key.at("ops");
    FUSEJIT_SPEC_TRY(parse_ops(ops_key, ops));
    const auto& [outputs_key, outputs] = by_key.at("outputs");
    return parse_outputs(outputs_key, outputs);
  }

  Status parse_precision_key(const YAML::Node& key, const YAML::Node& value) {
    std::string text;
    FUSEJIT_SPEC_TRY(scalar_string(key, value, "spec", text));
    auto p = parse_precision(text);
    if (!p)
      return err(value, "unknown precision '" + text + "'" + did_you_mean(text, precision_names()) +
                            "; expected " + join_alternatives(precision_names()));
    graph_.precision = *p;
    return Status::success();
  }

  // A non-empty list under a top-level key.
  Status nonempty_list(const YAML::Node& key, const YAML::Node& value,
                       const std::string& example) const {
    const std::string k = key.Scalar();
    if (value.IsNull() || (value.IsSequence() && value.size() == 0))
      return err(key, "'" + k + "' is empty: a spec needs at least one entry, e.g. " + example);
    if (!value.IsSequence())
      return err(value, "'" + k + "' must be a list, e.g. " + example);
    return Status::success();
  }

  // ---- inputs ------------------------------------------------------------------

  Status parse_inputs(const YAML::Node& key, const YAML::Node& list) {
    FUSEJIT_SPEC_TRY(nonempty_list(key, list, "[{name: x, shape: [64, 128]}]"));
    for (size_t i = 0; i < list.size(); ++i) FUSEJIT_SPEC_TRY(parse_input(list[i], i));
    return Status::success();
  }

  Status parse_input(const YAML::Node& map, size_t index) {
    std::string what = "input #" + std::to_string(index + 1);
    if (!map.IsMap())
      return err(map, what + ": must be a mapping like {name: x, shape: [64, 128]}");
    Entries items;
    FUSEJIT_SPEC_TRY(entries(map, what, items));
    Node node;
    node.op = OpKind::Input;
    node.loc = loc_of(map.Mark(), file_);
    node.type.dtype = anchor_dtype(graph_.precision);
    const YAML::Node* name_value = nullptr;
    for (const auto& [key, value] : items)
      if (key.Scalar() == "name") name_value = &value;
    if (name_value) {
      FUSEJIT_SPEC_TRY(parse_value_name(*name_value, what, node.name));
      what = "input '" + node.name + "'";
    }
    bool have_shape = false;
    for (const auto& [key, value] : items) {
      const std::string& k = key.Scalar();
      if (k == "name") continue;
      if (k == "shape") {
        FUSEJIT_SPEC_TRY(parse_shape(key, value, what, node.type.shape));
        have_shape = true;
      } else if (k == "dtype") {
        std::string text;
        FUSEJIT_SPEC_TRY(scalar_string(key, value, what, text));
        auto d = parse_dtype(text);
        if (!d)
          return err(value, what + ": unknown dtype '" + text + "'" +
                                did_you_mean(text, dtype_names()) + "; expected " +
                                join_alternatives(dtype_names()));
        node.type.dtype = *d;
      } else if (k == "init") {
        std::string text;
        FUSEJIT_SPEC_TRY(scalar_string(key, value, what, text));
        auto kind = parse_init(text);
        if (!kind)
          return err(value, what + ": unknown init '" + text + "'" +
                                did_you_mean(text, init_names()) + "; expected " +
                                join_alternatives(init_names()));
        node.init = *kind;
      } else {
        return err(key, what + ": unknown key '" + k + "'" + did_you_mean(k, kInputKeys) +
                            "; an input has " + join_alternatives(kInputKeys));
      }
    }
    if (!name_value) return err(map, what + ": missing required key 'name'");
    if (!have_shape) return err(map, what + ": missing required key 'shape'");
    return define(std::move(node), *name_value);
  }

  Status parse_shape(const YAML::Node& key, const YAML::Node& value, const std::string& what,
                     Shape& shape) const {
    if (!value.IsSequence())
      return err(value_or_key(key, value),
                 what + ": 'shape' must be a list of positive ints, e.g. [64, 128]");
    int64_t count = 1;
    for (const YAML::Node& dim : value) {
      if (!dim.IsScalar()) return err(dim, what + ": shape dims must be ints, not lists or maps");
      std::optional<int64_t> d = parse_int_scalar(dim.Scalar());
      if (!d) return err(dim, what + ": shape dim '" + dim.Scalar() + "' is not an integer");
      if (*d <= 0) return err(dim, what + ": shape dims must be positive, got " + dim.Scalar());
      if (*d > kMaxNumel / count)
        return err(dim, what + ": shape has too many elements (more than 2^48)");
      count *= *d;
      shape.push_back(*d);
    }
    return Status::success();
  }

  // ---- names -------------------------------------------------------------------

  Status parse_value_name(const YAML::Node& value, const std::string& what, std::string& out) const {
    if (!value.IsScalar()) return err(value, what + ": 'name' must be a plain name");
    out = value.Scalar();
    if (!is_identifier(out))
      return err(value, what + ": invalid name '" + out +
                            "' (names are letters, digits and '_', not starting with a digit)");
    return Status::success();
  }

  // Pre-pass over ops: where each op name is defined, so that a reference to
  // a later value can say so.
  void collect_op_names(const YAML::Node& ops) {
    for (const YAML::Node& op : ops)
      if (op.IsMap() && op["name"] && op["name"].IsScalar())
        later_.emplace(op["name"].Scalar(), op["name"].Mark().line + 1);
  }

  Status define(Node node, const YAML::Node& name_node) {
    const std::string name = node.name;
    if (auto it = defined_.find(name); it != defined_.end())
      return err(name_node, "duplicate value name '" + name + "' (first defined on line " +
                                std::to_string(graph_.node(it->second).loc.line) + ")");
    defined_.emplace(name, graph_.add(std::move(node)));
    return Status::success();
  }

  std::vector<std::string> defined_names() const {
    std::vector<std::string> names;
    for (const auto& [name, id] : defined_) names.push_back(name);
    return names;
  }

  // An operand: a number (-> constant node) or the name of an earlier value.
  Status parse_arg(const YAML::Node& arg, const std::string& what, const std::string& self,
                   ValueId& out) {
    if (!arg.IsScalar())
      return err(arg, what + ": each arg must be a value name or a number");
    const std::string& text = arg.Scalar();
    if (auto number = parse_float_scalar(text, /*allow_bare_inf=*/false)) {
      Node c;
      c.op = OpKind::Constant;
      c.attrs["value"] = *number;
      c.type = TensorType{DType::F32, {}};
      c.loc = loc_of(arg.Mark(), file_);
      out = graph_.add(std::move(c));
      return Status::success();
    }
    if (auto it = defined_.find(text); it != defined_.end()) {
      out = it->second;
      return Status::success();
    }
    if (text == self) return err(arg, what + ": '" + text + "' cannot use itself");
    if (auto it = later_.find(text); it != later_.end())
      return err(arg, what + ": '" + text + "' is used before it is defined (on line " +
                          std::to_string(it->second) + "); ops may only use earlier values");
    return err(arg, what + ": undefined value '" + text + "'" +
                        did_you_mean(text, defined_names()));
  }

  // ---- ops ---------------------------------------------------------------------

  Status parse_ops(const YAML::Node& key, const YAML::Node& list) {
    FUSEJIT_SPEC_TRY(nonempty_list(key, list, "[{name: y, op: relu, args: [x]}]"));
    collect_op_names(list);
    for (size_t i = 0; i < list.size(); ++i) FUSEJIT_SPEC_TRY(parse_op(list[i], i));
    return Status::success();
  }

  Status parse_op(const YAML::Node& map, size_t index) {
    std::string what = "op #" + std::to_string(index + 1);
    if (!map.IsMap())
      return err(map, what + ": must be a mapping like {name: y, op: relu, args: [x]}");
    Entries items;
    FUSEJIT_SPEC_TRY(entries(map, what, items));
    const YAML::Node *name_value = nullptr, *op_key = nullptr, *op_value = nullptr,
                     *args_key = nullptr, *args_value = nullptr;
    for (const auto& [key, value] : items) {
      const std::string& k = key.Scalar();
      if (k == "name") name_value = &value;
      if (k == "op") op_key = &key, op_value = &value;
      if (k == "args") args_key = &key, args_value = &value;
    }
    std::string name;
    if (name_value) {
      FUSEJIT_SPEC_TRY(parse_value_name(*name_value, what, name));
      what = "op '" + name + "'";
    }
    if (!op_value) return err(map, what + ": missing required key 'op'");
    if (!op_value->IsScalar())
      return err(value_or_key(*op_key, *op_value), what + ": 'op' must be an op name");
    const std::string op_text = op_value->Scalar();
    auto kind = op_from_name(op_text);
    if (kind && *kind == OpKind::Input)
      return err(*op_value, what + ": 'input' is not an op here; declare inputs under 'inputs'");
    if (kind && *kind == OpKind::Constant)
      return err(*op_value, what + ": 'constant' is not an op here; write numbers directly in args");
    if (!kind)
      return err(*op_value, what + ": unknown op '" + op_text + "'" +
                                did_you_mean(op_text, op_names()));
    const OpInfo& info = op_info(*kind);
    what = name.empty() ? info.name : info.name + " '" + name + "'";
    if (!name_value) return err(map, what + ": missing required key 'name'");
    if (!args_value) return err(map, what + ": missing required key 'args'");

    Node node;
    node.op = *kind;
    node.name = name;
    node.loc = loc_of(map.Mark(), file_);
    for (const auto& [key, value] : items) {
      const std::string& k = key.Scalar();
      if (k == "name" || k == "op" || k == "args") continue;
      const AttrSpec* spec = info.find_attr(k);
      if (!spec) return err(key, unknown_attr_message(info, what, k));
      std::optional<AttrValue> attr = convert_attr(spec->kind, value);
      if (!attr)
        return err(value_or_key(key, value),
                   what + ": '" + k + "' must be " + attr_kind_phrase(spec->kind));
      node.attrs[k] = std::move(*attr);
    }

    if (!args_value->IsSequence())
      return err(value_or_key(*args_key, *args_value),
                 what + ": 'args' must be a list of value names or numbers, e.g. [x]");
    const int count = static_cast<int>(args_value->size());
    if (count < info.min_operands || count > info.max_operands)
      return err(value_or_key(*args_key, *args_value),
                 what + ": expects " + operand_count_text(info) + ", got " + std::to_string(count));
    for (const YAML::Node& arg : *args_value) {
      ValueId id = -1;
      FUSEJIT_SPEC_TRY(parse_arg(arg, what, name, id));
      node.operands.push_back(id);
    }
    return define(std::move(node), *name_value);
  }

  // ---- outputs -----------------------------------------------------------------

  Status parse_outputs(const YAML::Node& key, const YAML::Node& list) {
    FUSEJIT_SPEC_TRY(nonempty_list(key, list, "[y]"));
    std::set<std::string> seen;
    for (const YAML::Node& entry : list) {
      if (!entry.IsScalar()) return err(entry, "outputs: each entry must be a value name");
      const std::string& name = entry.Scalar();
      auto it = defined_.find(name);
      if (it == defined_.end())
        return err(entry, "outputs: unknown value '" + name + "'" +
                              did_you_mean(name, defined_names()));
      if (!seen.insert(name).second)
        return err(entry, "outputs: '" + name + "' is listed twice");
      graph_.outputs.push_back(Output{name, it->second, loc_of(entry.Mark(), file_)});
    }
    return Status::success();
  }

  std::string file_;
  Graph graph_;
  std::map<std::string, ValueId> defined_;  // value names defined so far
  std::map<std::string, int> later_;        // op name -> line, for "used before defined"
};

// A hint for yaml-cpp's terse syntax messages, from the offending line.
std::string syntax_hint(const std::string& msg, std::string_view text, const YAML::Mark& mark) {
  if (mark.is_null() || mark.line < 0) return "";
  size_t start = 0;
  for (int l = 0; l < mark.line && start != std::string_view::npos; ++l) {
    start = text.find('\n', start);
    if (start != std::string_view::npos) ++start;
  }
  if (start == std::string_view::npos) return "";
  std::string_view line = text.substr(start, text.find('\n', start) - start);
  const size_t indent_end = line.find_first_not_of(" \t");
  if (line.substr(0, indent_end).find('\t') != std::string_view::npos)
    return " (tabs are not allowed in YAML indentation; use spaces)";
  if (msg.find("flow") != std::string::npos)
    return " (is a '[' or '{' closed by the wrong bracket, or not closed?)";
  if (msg.find("not found") != std::string::npos || msg.find("illegal map value") != std::string::npos)
    return " (check the indentation and that every 'key: value' is on its own line)";
  return "";
}

}  // namespace

Expected<Graph> parse_spec(std::string_view yaml_text, const std::string& filename) {
  try {
    return SpecParser(filename).parse(yaml_text);
  } catch (const YAML::DeepRecursion& e) {
    return Error("YAML nesting is too deep", spec_detail::loc_of(e.mark, filename));
  } catch (const YAML::Exception& e) {
    return Error("YAML syntax error: " + e.msg + syntax_hint(e.msg, yaml_text, e.mark),
                 spec_detail::loc_of(e.mark, filename));
  } catch (const std::exception& e) {
    return Error(std::string("internal error while reading the spec: ") + e.what(),
                 SourceLoc{filename, 0, 0});
  } catch (...) {
    return Error("internal error while reading the spec", SourceLoc{filename, 0, 0});
  }
}

Expected<Graph> load_spec_file(const std::string& path) {
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) return Error("cannot read '" + path + "': " + std::strerror(errno));
  std::string text;
  char buffer[1 << 14];
  size_t n = 0;
  while ((n = std::fread(buffer, 1, sizeof buffer, f)) > 0) text.append(buffer, n);
  const int read_errno = std::ferror(f) ? errno : 0;
  std::fclose(f);
  if (read_errno != 0) return Error("cannot read '" + path + "': " + std::strerror(read_errno));
  return parse_spec(text, path);
}

}  // namespace fusejit
