// Parses the canonical text form (print_graph) back into a prepared Graph.
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <map>

#include "ir/passes.h"

namespace fusejit {
namespace {

struct Token {
  enum Kind { Ident, Number, String, Punct, Comment, End } kind = End;
  std::string text;
  SourceLoc loc;
};

class Lexer {
 public:
  Lexer(std::string_view text, std::string file) : t_(text), file_(std::move(file)) {}

  Expected<std::vector<Token>> run() {
    std::vector<Token> out;
    while (true) {
      skip_space();
      Token tok;
      tok.loc = {file_, line_, col_};
      if (pos_ >= t_.size()) {
        out.push_back(tok);
        return out;
      }
      char c = t_[pos_];
      if (c == '/' && peek(1) == '/') {
        advance(2);
        size_t start = pos_;
        while (pos_ < t_.size() && t_[pos_] != '\n') advance(1);
        tok.kind = Token::Comment;
        tok.text = trim(t_.substr(start, pos_ - start));
      } else if (c == '"') {
        advance(1);
        size_t start = pos_;
        while (pos_ < t_.size() && t_[pos_] != '"' && t_[pos_] != '\n') advance(1);
        if (pos_ >= t_.size() || t_[pos_] != '"') return Error("unterminated string", tok.loc);
        tok.kind = Token::String;
        tok.text = std::string(t_.substr(start, pos_ - start));
        advance(1);
      } else if (std::isdigit(static_cast<unsigned char>(c)) || (c == '-' && pos_ + 1 < t_.size())) {
        size_t start = pos_;
        advance(1);
        while (pos_ < t_.size() && (std::isalnum(static_cast<unsigned char>(t_[pos_])) || t_[pos_] == '.' ||
                                    ((t_[pos_] == '-' || t_[pos_] == '+') && (t_[pos_ - 1] == 'e'))))
          advance(1);
        tok.kind = Token::Number;
        tok.text = std::string(t_.substr(start, pos_ - start));
      } else if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
        size_t start = pos_;
        while (pos_ < t_.size() && (std::isalnum(static_cast<unsigned char>(t_[pos_])) || t_[pos_] == '_' ||
                                    t_[pos_] == '.'))
          advance(1);
        tok.kind = Token::Ident;
        tok.text = std::string(t_.substr(start, pos_ - start));
      } else if (std::string_view("%=(),:[]{}").find(c) != std::string_view::npos) {
        tok.kind = Token::Punct;
        tok.text = std::string(1, c);
        advance(1);
      } else {
        return Error(std::string("unexpected character '") + c + "'", tok.loc);
      }
      out.push_back(tok);
    }
  }

 private:
  std::string_view t_;
  std::string file_;
  size_t pos_ = 0;
  int line_ = 1, col_ = 1;

  char peek(size_t k) const { return pos_ + k < t_.size() ? t_[pos_ + k] : '\0'; }
  void advance(size_t k) {
    for (size_t i = 0; i < k && pos_ < t_.size(); ++i, ++pos_) {
      if (t_[pos_] == '\n') ++line_, col_ = 1;
      else ++col_;
    }
  }
  void skip_space() {
    while (pos_ < t_.size() && std::isspace(static_cast<unsigned char>(t_[pos_]))) advance(1);
  }
  static std::string trim(std::string_view s) {
    while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
    while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
    return std::string(s);
  }
};

class Parser {
 public:
  explicit Parser(std::vector<Token> toks) : toks_(std::move(toks)) {}

  Expected<Graph> run() {
    Graph g;
    if (Status s = expect_ident("fusejit.graph"); !s) return s.error();
    if (cur().kind == Token::String) g.name = next().text;
    if (Status s = expect_ident("precision"); !s) return s.error();
    if (Status s = expect_punct("="); !s) return s.error();
    Token p = next();
    auto prec = parse_precision(p.text);
    if (!prec) return Error("unknown precision '" + p.text + "'", p.loc);
    g.precision = *prec;
    if (Status s = expect_punct("{"); !s) return s.error();
    while (!is_punct("}")) {
      if (cur().kind == Token::End) return Error("missing '}' at the end of the graph", cur().loc);
      Status s = cur().kind == Token::Ident && cur().text == "output" ? output(g) : value(g);
      if (!s) return s.error();
    }
    next();
    if (cur().kind != Token::End) return Error("unexpected text after the graph", cur().loc);
    return g;
  }

 private:
  std::vector<Token> toks_;
  size_t i_ = 0;
  std::map<std::string, ValueId> ids_;  // printed "%N" -> node index

  const Token& cur() const { return toks_[i_]; }
  Token next() { return toks_[i_ < toks_.size() - 1 ? i_++ : i_]; }
  bool is_punct(const char* p) const { return cur().kind == Token::Punct && cur().text == p; }
  Status expect_punct(const char* p) {
    if (!is_punct(p)) return Error(std::string("expected '") + p + "', got '" + cur().text + "'", cur().loc);
    next();
    return {};
  }
  Status expect_ident(const char* w) {
    if (cur().kind != Token::Ident || cur().text != w)
      return Error(std::string("expected '") + w + "', got '" + cur().text + "'", cur().loc);
    next();
    return {};
  }
  Expected<ValueId> ref() {
    SourceLoc loc = cur().loc;
    if (Status s = expect_punct("%"); !s) return s.error();
    Token n = next();
    auto it = ids_.find(n.text);
    if (it == ids_.end()) return Error("%" + n.text + " is not defined before it is used", loc);
    return it->second;
  }
  Expected<int64_t> integer() {
    Token t = next();
    char* end = nullptr;
    long long v = std::strtoll(t.text.c_str(), &end, 10);
    if (t.kind != Token::Number || *end) return Error("expected an integer, got '" + t.text + "'", t.loc);
    return static_cast<int64_t>(v);
  }
  Expected<std::vector<int64_t>> int_list() {
    std::vector<int64_t> xs;
    if (Status s = expect_punct("["); !s) return s.error();
    while (!is_punct("]")) {
      auto v = integer();
      if (!v) return v.error();
      xs.push_back(*v);
      if (is_punct(",")) next();
      else if (!is_punct("]")) return Error("expected ',' or ']'", cur().loc);
    }
    next();
    return xs;
  }
  Expected<AttrValue> attr_value() {
    if (is_punct("[")) {
      auto xs = int_list();
      if (!xs) return xs.error();
      return AttrValue(*xs);
    }
    Token t = next();
    if (t.kind == Token::String) return AttrValue(t.text);
    if (t.text == "true" || t.text == "false") return AttrValue(t.text == "true");
    if (t.text == "inf" || t.text == "-inf")
      return AttrValue(t.text == "inf" ? std::numeric_limits<double>::infinity()
                                       : -std::numeric_limits<double>::infinity());
    if (t.text == "nan") return AttrValue(std::numeric_limits<double>::quiet_NaN());
    if (t.kind != Token::Number) return Error("expected an attribute value, got '" + t.text + "'", t.loc);
    char* end = nullptr;
    if (t.text.find_first_of(".eE") == std::string::npos) {
      long long v = std::strtoll(t.text.c_str(), &end, 10);
      if (!*end) return AttrValue(static_cast<int64_t>(v));
    } else {
      double v = std::strtod(t.text.c_str(), &end);
      if (!*end) return AttrValue(v);
    }
    return Error("malformed number '" + t.text + "'", t.loc);
  }
  Expected<TensorType> type() {
    Token t = next();
    auto dt = parse_dtype(t.text);
    if (!dt) return Error("unknown dtype '" + t.text + "'", t.loc);
    auto shape = int_list();
    if (!shape) return shape.error();
    return TensorType{*dt, *shape};
  }

  Status value(Graph& g) {
    SourceLoc loc = cur().loc;
    if (Status s = expect_punct("%"); !s) return s;
    std::string id = next().text;
    if (ids_.count(id)) return Error("%" + id + " is defined twice", loc);
    if (Status s = expect_punct("="); !s) return s;
    Token op = next();
    auto kind = op_from_name(op.text);
    if (!kind) return Error("unknown op '" + op.text + "'", op.loc);
    Node n;
    n.op = *kind;
    n.loc = loc;
    if (n.op == OpKind::Input && cur().kind == Token::String) n.name = next().text;
    if (is_punct("(")) {
      next();
      while (!is_punct(")")) {
        auto r = ref();
        if (!r) return r.error();
        n.operands.push_back(*r);
        if (is_punct(",")) next();
        else if (!is_punct(")")) return Error("expected ',' or ')'", cur().loc);
      }
      next();
    }
    while (cur().kind == Token::Ident) {
      std::string key = next().text;
      if (Status s = expect_punct("="); !s) return s;
      auto v = attr_value();
      if (!v) return v.error();
      n.attrs[key] = *v;
    }
    if (Status s = expect_punct(":"); !s) return s;
    auto t = type();
    if (!t) return t.error();
    n.type = *t;
    if (cur().kind == Token::Ident && cur().text == "init") {
      next();
      if (Status s = expect_punct("="); !s) return s;
      Token k = next();
      auto init = parse_init(k.text);
      if (!init) return Error("unknown init '" + k.text + "'", k.loc);
      n.init = *init;
    }
    if (cur().kind == Token::Comment) n.name = next().text;
    ids_[id] = g.add(std::move(n));
    return {};
  }

  Status output(Graph& g) {
    Output out;
    out.loc = cur().loc;
    next();
    if (cur().kind == Token::String) out.name = next().text;
    if (Status s = expect_punct("="); !s) return s;
    auto r = ref();
    if (!r) return r.error();
    out.value = *r;
    if (out.name.empty()) out.name = "out" + std::to_string(g.outputs.size());
    g.outputs.push_back(out);
    return {};
  }
};

}  // namespace

Expected<Graph> parse_graph_text(std::string_view text, const std::string& filename) {
  auto toks = Lexer(text, filename).run();
  if (!toks) return toks.error();
  auto parsed = Parser(toks.take()).run();
  if (!parsed) return parsed.error();
  Graph g = parsed.take();
  // Each printed type must match what inference derives. Nodes keep their
  // text location through canonical reordering, so match them by it.
  std::map<std::pair<int, int>, TensorType> declared;
  for (const Node& n : g.nodes) declared[{n.loc.line, n.loc.col}] = n.type;
  if (Status s = prepare_graph(g); !s) return s.error();
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const Node& n = g.nodes[i];
    const TensorType& want = declared.at({n.loc.line, n.loc.col});
    if (n.op != OpKind::Input && want != n.type)
      return node_error(g, static_cast<ValueId>(i),
                        "the written type " + want.str() + " differs from the inferred " + n.type.str());
  }
  return g;
}

}  // namespace fusejit
