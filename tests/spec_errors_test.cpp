// Malformed specs: each must fail with a clear message at the right place.
// Text errors come from the spec parser; semantic ones from prepare_graph
// (through the locations the parser records on every node).
#include <gtest/gtest.h>

#include <string>

#include "fusejit/spec.h"

namespace fusejit {
namespace {

struct BadSpec {
  const char* label;
  const char* yaml;
  const char* message;  // expected substring of Error::message
  int line;             // expected 1-based line
  const char* at;       // the error points at the first occurrence of this
                        // text on that line ("": column not checked)
};

// The 1-based column of `at` on line `line` of `text` (0 if absent).
int column_of(const std::string& text, int line, const std::string& at) {
  size_t start = 0;
  for (int l = 1; l < line && start != std::string::npos; ++l) {
    start = text.find('\n', start);
    if (start != std::string::npos) ++start;
  }
  if (start == std::string::npos) return 0;
  const std::string row = text.substr(start, text.find('\n', start) - start);
  const size_t pos = row.find(at);
  return pos == std::string::npos ? 0 : static_cast<int>(pos) + 1;
}

// A valid spec most cases below vary (line numbers in comments):
//   1 inputs:
//   2   - {name: x, shape: [4, 8]}
//   3   - {name: w, shape: [16, 8]}
//   4 ops:
//   5   - {name: h, op: linear, args: [x, w]}
//   6   - {name: y, op: relu, args: [h]}
//   7 outputs: [y]
const BadSpec kCases[] = {
    // ---- YAML itself ----
    {"syntax: unclosed flow list", "inputs:\n  - {name: x, shape: [4, 8}\n", "YAML syntax error", 2, ""},
    {"syntax: bad indentation", "inputs:\n  - name: x\n   shape: [4]\n", "YAML syntax error", 3, ""},
    {"syntax: undefined alias", "inputs: *nothing\n", "YAML syntax error", 1, ""},
    {"empty file", "", "the spec is empty", 1, ""},
    {"only comments", "# nothing here\n", "the spec is empty", 1, ""},
    {"tab indentation", "inputs:\n\t- {name: x, shape: [4]}\n", "tabs are not allowed in YAML indentation", 2, ""},
    {"top level is a list", "- inputs\n- ops\n", "a spec must be a YAML mapping", 1, "- inputs"},
    {"top level is a scalar", "hello\n", "a spec must be a YAML mapping", 1, "hello"},
    {"two documents", "inputs: []\n---\nops: []\n", "found a second one", 3, "ops"},

    // ---- top-level keys ----
    {"unknown top-level key",
     "inputs:\n  - {name: x, shape: [4, 8]}\nopps: []\n", "unknown top-level key 'opps' (did you mean 'ops'?)", 3, "opps"},
    {"missing outputs",
     "inputs:\n  - {name: x, shape: [4, 8]}\n  - {name: w, shape: [16, 8]}\nops:\n"
     "  - {name: h, op: linear, args: [x, w]}\n",
     "missing required top-level key 'outputs'", 1, "inputs"},
    {"duplicate top-level key",
     "inputs:\n  - {name: x, shape: [4, 8]}\ninputs: []\nops: []\noutputs: []\n",
     "duplicate key 'inputs' (first given on line 1)", 3, "inputs"},
    {"unknown precision", "precision: fp64\ninputs: []\nops: []\noutputs: []\n",
     "unknown precision 'fp64'", 1, "fp64"},
    {"precision typo", "precision: tf3\ninputs: []\nops: []\noutputs: []\n",
     "unknown precision 'tf3' (did you mean 'tf32'?)", 1, "tf3"},
    {"name not a string", "name: [a, b]\ninputs: []\nops: []\noutputs: []\n", "'name' must be a string", 1, "[a, b]"},
    {"inputs is a mapping", "inputs: {x: [4, 8]}\nops: []\noutputs: []\n", "'inputs' must be a list", 1, "{x:"},
    {"inputs empty", "inputs: []\nops:\n  - {name: y, op: relu, args: [x]}\noutputs: [y]\n",
     "'inputs' is empty", 1, "inputs"},
    {"ops empty", "inputs:\n  - {name: x, shape: [4]}\nops:\noutputs: [x]\n", "'ops' is empty", 3, "ops"},
    {"outputs empty",
     "inputs:\n  - {name: x, shape: [4, 8]}\n  - {name: w, shape: [16, 8]}\nops:\n"
     "  - {name: h, op: linear, args: [x, w]}\noutputs: []\n",
     "'outputs' is empty", 6, "outputs"},

    // ---- inputs ----
    {"input is a scalar", "inputs:\n  - x\nops: []\noutputs: []\n", "input #1: must be a mapping", 2, "x"},
    {"input without name",
     "inputs:\n  - {name: x, shape: [4, 8]}\n  - {shape: [16, 8]}\nops: []\noutputs: []\n",
     "input #2: missing required key 'name'", 3, "{shape"},
    {"input without shape", "inputs:\n  - {name: x}\nops: []\noutputs: []\n",
     "input 'x': missing required key 'shape'", 2, "{name"},
    {"input key typo", "inputs:\n  - {name: x, shap: [4, 8]}\nops: []\noutputs: []\n",
     "input 'x': unknown key 'shap' (did you mean 'shape'?)", 2, "shap"},
    {"zero dim", "inputs:\n  - {name: x, shape: [4, 0]}\nops: []\noutputs: []\n",
     "input 'x': shape dims must be positive, got 0", 2, "0]"},
    {"negative dim", "inputs:\n  - {name: x, shape: [-4, 8]}\nops: []\noutputs: []\n",
     "shape dims must be positive, got -4", 2, "-4"},
    {"fractional dim", "inputs:\n  - {name: x, shape: [4, 2.5]}\nops: []\noutputs: []\n",
     "input 'x': shape dim '2.5' is not an integer", 2, "2.5"},
    {"shape not a list", "inputs:\n  - {name: x, shape: 8}\nops: []\noutputs: []\n",
     "input 'x': 'shape' must be a list of positive ints", 2, "8}"},
    {"shape too large", "inputs:\n  - {name: x, shape: [65536, 65536, 65536, 2]}\nops: []\noutputs: []\n",
     "too many elements", 2, ""},
    {"unknown dtype", "inputs:\n  - {name: x, shape: [4], dtype: fp16}\nops: []\noutputs: []\n",
     "input 'x': unknown dtype 'fp16' (did you mean 'f16'?)", 2, "fp16"},
    {"unknown init", "inputs:\n  - {name: x, shape: [4], init: randn}\nops: []\noutputs: []\n",
     "input 'x': unknown init 'randn'", 2, "randn"},
    {"bad value name", "inputs:\n  - {name: 1x, shape: [4]}\nops: []\noutputs: []\n",
     "input #1: invalid name '1x'", 2, "1x"},

    // ---- ops ----
    {"duplicate value name",
     "inputs:\n  - {name: x, shape: [4, 8]}\n  - {name: w, shape: [16, 8]}\nops:\n"
     "  - {name: x, op: linear, args: [x, w]}\noutputs: [x]\n",
     "duplicate value name 'x' (first defined on line 2)", 5, "x, op"},
    {"op is a list",
     "inputs:\n  - {name: x, shape: [4, 8]}\nops:\n  - [relu, x]\noutputs: [x]\n", "op #1: must be a mapping", 4, "[relu"},
    {"op without op key",
     "inputs:\n  - {name: x, shape: [4, 8]}\n  - {name: w, shape: [16, 8]}\nops:\n"
     "  - {name: h, args: [x, w]}\noutputs: [h]\n",
     "op 'h': missing required key 'op'", 5, "{name"},
    {"unknown op",
     "inputs:\n  - {name: x, shape: [4, 8]}\n  - {name: w, shape: [16, 8]}\nops:\n"
     "  - {name: h, op: linear, args: [x, w]}\n  - {name: y, op: rellu, args: [h]}\noutputs: [y]\n",
     "op 'y': unknown op 'rellu' (did you mean 'relu'?)", 6, "rellu"},
    {"input used as an op",
     "inputs:\n  - {name: x, shape: [4, 8]}\nops:\n  - {name: z, op: input, args: []}\noutputs: [z]\n",
     "'input' is not an op here; declare inputs under 'inputs'", 4, "input"},
    {"constant used as an op",
     "inputs:\n  - {name: x, shape: [4, 8]}\nops:\n  - {name: z, op: constant, args: [], value: 1}\noutputs: [z]\n",
     "write numbers directly in args", 4, "constant"},
    {"op without name",
     "inputs:\n  - {name: x, shape: [4, 8]}\n  - {name: w, shape: [16, 8]}\nops:\n"
     "  - {name: h, op: linear, args: [x, w]}\n  - {op: relu, args: [h]}\noutputs: [h]\n",
     "relu: missing required key 'name'", 6, "{op"},
    {"op without args",
     "inputs:\n  - {name: x, shape: [4, 8]}\n  - {name: w, shape: [16, 8]}\nops:\n"
     "  - {name: h, op: linear, args: [x, w]}\n  - {name: y, op: relu}\noutputs: [y]\n",
     "relu 'y': missing required key 'args'", 6, "{name"},
    {"args not a list",
     "inputs:\n  - {name: x, shape: [4, 8]}\n  - {name: w, shape: [16, 8]}\nops:\n"
     "  - {name: h, op: linear, args: [x, w]}\n  - {name: y, op: relu, args: h}\noutputs: [y]\n",
     "relu 'y': 'args' must be a list of value names or numbers", 6, "h}"},
    {"too many args",
     "inputs:\n  - {name: x, shape: [4, 8]}\n  - {name: w, shape: [16, 8]}\nops:\n"
     "  - {name: h, op: linear, args: [x, w]}\n  - {name: y, op: relu, args: [h, h]}\noutputs: [y]\n",
     "relu 'y': expects 1 operand (x), got 2", 6, "[h, h]"},
    {"too few args for conv2d",
     "inputs:\n  - {name: x, shape: [1, 3, 8, 8]}\nops:\n  - {name: c, op: conv2d, args: [x]}\noutputs: [c]\n",
     "conv2d 'c': expects 2 to 3 operands (x, weight, bias), got 1", 4, "[x]"},
    {"arg is a mapping",
     "inputs:\n  - {name: x, shape: [4, 8]}\n  - {name: w, shape: [16, 8]}\nops:\n"
     "  - {name: h, op: linear, args: [x, {w: 1}]}\noutputs: [h]\n",
     "linear 'h': each arg must be a value name or a number", 5, "{w: 1}"},
    {"undefined value",
     "inputs:\n  - {name: x, shape: [4, 8]}\n  - {name: w, shape: [16, 8]}\nops:\n"
     "  - {name: h, op: linear, args: [x, w]}\n  - {name: y, op: relu, args: [hh]}\noutputs: [y]\n",
     "relu 'y': undefined value 'hh' (did you mean 'h'?)", 6, "hh"},
    {"value used before it is defined",
     "inputs:\n  - {name: x, shape: [4, 8]}\n  - {name: w, shape: [16, 8]}\nops:\n"
     "  - {name: h, op: linear, args: [x, w]}\n  - {name: y, op: add, args: [h, z]}\n"
     "  - {name: z, op: relu, args: [h]}\noutputs: [y]\n",
     "add 'y': 'z' is used before it is defined (on line 7)", 6, "z]"},
    {"value uses itself",
     "inputs:\n  - {name: x, shape: [4, 8]}\n  - {name: w, shape: [16, 8]}\nops:\n"
     "  - {name: h, op: linear, args: [x, w]}\n  - {name: y, op: add, args: [h, y]}\noutputs: [y]\n",
     "add 'y': 'y' cannot use itself", 6, "y]"},
    {"duplicate key in an op",
     "inputs:\n  - {name: x, shape: [4, 8]}\n  - {name: w, shape: [16, 8]}\nops:\n"
     "  - {name: h, op: linear, args: [x, w], args: [x]}\noutputs: [h]\n",
     "op #1: duplicate key 'args' (first given on line 5)", 5, "args: [x]}"},

    // ---- attributes ----
    {"attribute of another op",
     "inputs:\n  - {name: x, shape: [4, 8]}\n  - {name: w, shape: [16, 8]}\nops:\n"
     "  - {name: h, op: linear, args: [x, w]}\n  - {name: y, op: relu, args: [h], negative_slope: 0.1}\n"
     "outputs: [y]\n",
     "relu 'y': unknown attribute 'negative_slope' ('negative_slope' is an attribute of leaky_relu); "
     "relu takes no attributes",
     6, "negative_slope"},
    {"attribute typo",
     "inputs:\n  - {name: x, shape: [4, 8]}\n  - {name: w, shape: [16, 8]}\nops:\n"
     "  - {name: h, op: linear, args: [x, w]}\n  - {name: y, op: leaky_relu, args: [h], slope: 0.1}\n"
     "outputs: [y]\n",
     "leaky_relu 'y': unknown attribute 'slope' (did you mean 'negative_slope'?)", 6, "slope"},
    {"stride with three values",
     "inputs:\n  - {name: x, shape: [1, 3, 8, 8]}\n  - {name: w, shape: [4, 3, 3, 3]}\nops:\n"
     "  - {name: c, op: conv2d, args: [x, w], stride: [1, 2, 3]}\noutputs: [c]\n",
     "conv2d 'c': 'stride' must be an int or a list of two ints", 5, "[1, 2, 3]"},
    {"fractional groups",
     "inputs:\n  - {name: x, shape: [1, 4, 8, 8]}\n  - {name: w, shape: [4, 2, 3, 3]}\nops:\n"
     "  - {name: c, op: conv2d, args: [x, w], groups: 1.5}\noutputs: [c]\n",
     "conv2d 'c': 'groups' must be an int", 5, "1.5"},
    {"keepdim not a bool",
     "inputs:\n  - {name: x, shape: [4, 8]}\n  - {name: w, shape: [16, 8]}\nops:\n"
     "  - {name: h, op: linear, args: [x, w]}\n  - {name: s, op: sum, args: [h], dims: [1], keepdim: maybe}\n"
     "outputs: [s]\n",
     "sum 's': 'keepdim' must be true or false", 6, "maybe"},
    {"slope not a number",
     "inputs:\n  - {name: x, shape: [4, 8]}\n  - {name: w, shape: [16, 8]}\nops:\n"
     "  - {name: h, op: linear, args: [x, w]}\n  - {name: y, op: leaky_relu, args: [h], negative_slope: steep}\n"
     "outputs: [y]\n",
     "leaky_relu 'y': 'negative_slope' must be a number", 6, "steep"},
    {"empty attribute value",
     "inputs:\n  - {name: x, shape: [4, 8]}\n  - {name: w, shape: [16, 8]}\nops:\n"
     "  - {name: h, op: linear, args: [x, w]}\n  - name: y\n    op: elu\n    args: [h]\n    alpha:\n"
     "outputs: [y]\n",
     "elu 'y': 'alpha' must be a number", 9, "alpha"},
    {"dims with a name",
     "inputs:\n  - {name: x, shape: [4, 8]}\n  - {name: w, shape: [16, 8]}\nops:\n"
     "  - {name: h, op: linear, args: [x, w]}\n  - {name: s, op: sum, args: [h], dims: [rows]}\noutputs: [s]\n",
     "sum 's': 'dims' must be an int or a list of ints", 6, "[rows]"},

    // ---- outputs ----
    {"unknown output",
     "inputs:\n  - {name: x, shape: [4, 8]}\n  - {name: w, shape: [16, 8]}\nops:\n"
     "  - {name: h, op: linear, args: [x, w]}\n  - {name: y, op: relu, args: [h]}\noutputs: [yy]\n",
     "outputs: unknown value 'yy' (did you mean 'y'?)", 7, "yy"},
    {"output listed twice",
     "inputs:\n  - {name: x, shape: [4, 8]}\n  - {name: w, shape: [16, 8]}\nops:\n"
     "  - {name: h, op: linear, args: [x, w]}\n  - {name: y, op: relu, args: [h]}\noutputs: [y, y]\n",
     "outputs: 'y' is listed twice", 7, "y]"},
    {"output entry not a name",
     "inputs:\n  - {name: x, shape: [4, 8]}\n  - {name: w, shape: [16, 8]}\nops:\n"
     "  - {name: h, op: linear, args: [x, w]}\noutputs: [{h: 1}]\n",
     "outputs: each entry must be a value name", 6, "{h: 1}"},

    // ---- semantic errors from prepare_graph, located through node locs ----
    {"missing required attribute",
     "inputs:\n  - {name: x, shape: [4, 8]}\n  - {name: w, shape: [16, 8]}\nops:\n"
     "  - {name: h, op: linear, args: [x, w]}\n  - {name: p, op: softmax, args: [h]}\noutputs: [p]\n",
     "softmax 'p': missing required attribute 'dim'", 6, "{"},
    {"conv weight channels mismatch",
     "inputs:\n  - {name: x, shape: [2, 3, 8, 8]}\n  - {name: w, shape: [4, 5, 3, 3]}\nops:\n"
     "  - {name: c, op: conv2d, args: [x, w]}\noutputs: [c]\n",
     "conv2d 'c': weight [4,5,3,3] expects 5 input channels per group but x [2,3,8,8] has 3", 5, "{"},
    {"groups do not divide channels",
     "inputs:\n  - {name: x, shape: [2, 6, 8, 8]}\n  - {name: w, shape: [4, 2, 3, 3]}\nops:\n"
     "  - {name: c, op: conv2d, args: [x, w], groups: 4}\noutputs: [c]\n",
     "conv2d 'c': groups=4 must divide Cin=6", 5, "{"},
    {"conv kernel larger than input",
     "inputs:\n  - {name: x, shape: [2, 3, 2, 2]}\n  - {name: w, shape: [4, 3, 3, 3]}\nops:\n"
     "  - {name: c, op: conv2d, args: [x, w]}\noutputs: [c]\n",
     "conv2d 'c': the 3x3 kernel (dilation 1x1) does not fit the 2x2 input", 5, "{"},
    {"insert_zeros negative crop",
     "inputs:\n  - {name: x, shape: [2, 3, 4, 4]}\nops:\n"
     "  - {name: s, op: insert_zeros, args: [x], stride: 2, crop: [0, -1]}\noutputs: [s]\n",
     "insert_zeros 's': 'crop' must be non-negative, got [0,-1]", 4, "{"},
    {"insert_zeros crop removes every row",
     "inputs:\n  - {name: x, shape: [2, 3, 2, 4]}\nops:\n"
     "  - {name: s, op: insert_zeros, args: [x], stride: 2, crop: [2, 0]}\noutputs: [s]\n",
     "insert_zeros 's': 'crop' [2,0] removes every row of the 3 spread rows", 4, "{"},
    {"insert_zeros_backward grad size not reachable",
     "inputs:\n  - {name: g, shape: [2, 3, 6, 5]}\nops:\n"
     "  - {name: d, op: insert_zeros_backward, args: [g], stride: 2}\noutputs: [d]\n",
     "insert_zeros_backward 'd': 'grad' has 6 rows: insert_zeros with stride 2, extra 0, crop 0 gives (H - 1) * 2 + 1 "
     "rows for no integer H >= 1", 4, "{"},
    {"insert_zeros_backward negative extra",
     "inputs:\n  - {name: g, shape: [2, 3, 5, 5]}\nops:\n"
     "  - {name: d, op: insert_zeros_backward, args: [g], stride: 2, extra: [-1, 0]}\noutputs: [d]\n",
     "insert_zeros_backward 'd': 'extra' must be non-negative, got [-1,0]", 4, "{"},
    {"insert_zeros_backward 3-D grad",
     "inputs:\n  - {name: g, shape: [3, 5, 5]}\nops:\n"
     "  - {name: d, op: insert_zeros_backward, args: [g], stride: 2}\noutputs: [d]\n",
     "insert_zeros_backward 'd': grad must be 4-D NCHW, got [3,5,5]", 4, "{"},
    {"im2col_backward grad is not im2col's shape",
     "inputs:\n  - {name: g, shape: [18, 8]}\nops:\n"
     "  - {name: d, op: im2col_backward, args: [g], input_shape: [1, 2, 4, 4], kernel_size: 3}\noutputs: [d]\n",
     "im2col_backward 'd': 'grad' is [18,8] but im2col of [1,2,4,4] gives [18,4]", 4, "{"},
    {"im2col_backward input_shape not 4-D",
     "inputs:\n  - {name: g, shape: [18, 4]}\nops:\n"
     "  - {name: d, op: im2col_backward, args: [g], input_shape: [2, 4, 4], kernel_size: 3}\noutputs: [d]\n",
     "im2col_backward 'd': the unfolded input must be 4-D NCHW, got [2,4,4]", 4, "{"},
    {"im2col_backward missing input_shape",
     "inputs:\n  - {name: g, shape: [18, 4]}\nops:\n"
     "  - {name: d, op: im2col_backward, args: [g], kernel_size: 3}\noutputs: [d]\n",
     "im2col_backward 'd': missing required attribute 'input_shape'", 4, "{"},
    {"im2col_backward kernel larger than input",
     "inputs:\n  - {name: g, shape: [18, 4]}\nops:\n"
     "  - {name: d, op: im2col_backward, args: [g], input_shape: [1, 2, 2, 2], kernel_size: 3}\noutputs: [d]\n",
     "im2col_backward 'd': kernel 3x3 is larger than the 2x2 input", 4, "{"},
    {"max_pool2d_double_backward grad not shaped like x",
     "inputs:\n  - {name: x, shape: [2, 3, 8, 8]}\n  - {name: g, shape: [2, 3, 4, 4]}\nops:\n"
     "  - {name: d, op: max_pool2d_double_backward, args: [x, g], kernel_size: 2}\noutputs: [d]\n",
     "max_pool2d_double_backward 'd': 'grad' is [2,3,4,4] but x is [2,3,8,8] (grad is a gradient of x)", 5, "{"},
    {"max_pool2d_double_backward padding over half the kernel",
     "inputs:\n  - {name: x, shape: [2, 3, 8, 8]}\n  - {name: g, shape: [2, 3, 8, 8]}\nops:\n"
     "  - {name: d, op: max_pool2d_double_backward, args: [x, g], kernel_size: 2, padding: 2}\noutputs: [d]\n",
     "max_pool2d_double_backward 'd': padding 2x2 must be at most half the kernel 2x2", 5, "{"},
    {"linear K mismatch",
     "inputs:\n  - {name: x, shape: [4, 8]}\n  - {name: w, shape: [16, 9]}\nops:\n"
     "  - {name: h, op: linear, args: [x, w]}\noutputs: [h]\n",
     "linear 'h': x [4,8] has K=8 features but weight [16,9] expects K=9", 5, "{"},
    {"matmul batch dims do not broadcast",
     "inputs:\n  - {name: a, shape: [3, 4, 8]}\n  - {name: b, shape: [2, 8, 5]}\nops:\n"
     "  - {name: m, op: matmul, args: [a, b]}\noutputs: [m]\n",
     "matmul 'm': batch dims [3] and [2] do not broadcast", 5, "{"},
    {"broadcast failure",
     "inputs:\n  - {name: x, shape: [4, 8]}\n  - {name: w, shape: [16, 8]}\n  - {name: b, shape: [8]}\nops:\n"
     "  - {name: h, op: linear, args: [x, w]}\n  - {name: y, op: add, args: [h, b]}\noutputs: [y]\n",
     "add 'y': shapes [4,16] and [8] do not broadcast", 7, "{"},
    {"max_pool2d kernel larger than input",
     "inputs:\n  - {name: x, shape: [1, 3, 6, 6]}\n  - {name: w, shape: [4, 3, 3, 3]}\nops:\n"
     "  - {name: c, op: conv2d, args: [x, w]}\n  - {name: p, op: max_pool2d, args: [c], kernel_size: 5}\n"
     "outputs: [p]\n",
     "max_pool2d 'p': kernel 5 is larger than the 4x4 input", 6, "{"},
    {"pool padding over half the kernel",
     "inputs:\n  - {name: x, shape: [1, 3, 10, 10]}\n  - {name: w, shape: [4, 3, 3, 3]}\nops:\n"
     "  - {name: c, op: conv2d, args: [x, w]}\n"
     "  - {name: p, op: avg_pool2d, args: [c], kernel_size: 2, padding: 2}\noutputs: [p]\n",
     "avg_pool2d 'p': padding 2x2 must be at most half the kernel 2x2", 6, "{"},
    {"pool1d on a short dim",
     "inputs:\n  - {name: x, shape: [4, 8]}\n  - {name: w, shape: [3, 8]}\nops:\n"
     "  - {name: h, op: linear, args: [x, w]}\n  - {name: p, op: max_pool1d, args: [h], kernel_size: 4}\n"
     "outputs: [p]\n",
     "max_pool1d 'p': kernel 4 is larger than the last dim (3)", 6, "{"},
    {"reduction dim out of range",
     "inputs:\n  - {name: x, shape: [4, 8]}\n  - {name: w, shape: [16, 8]}\nops:\n"
     "  - {name: h, op: linear, args: [x, w]}\n  - {name: s, op: sum, args: [h], dims: [2]}\noutputs: [s]\n",
     "sum 's': dim 2 is out of range for the 2-D input [4,16]", 6, "{"},
    {"gelu approximate value",
     "inputs:\n  - {name: x, shape: [4, 8]}\n  - {name: w, shape: [16, 8]}\nops:\n"
     "  - {name: h, op: linear, args: [x, w]}\n  - {name: g, op: gelu, args: [h], approximate: fast}\n"
     "outputs: [g]\n",
     "gelu 'g': 'approximate' must be \"none\" or \"tanh\", got \"fast\"", 6, "{"},
    {"cast to an unknown dtype",
     "inputs:\n  - {name: x, shape: [4, 8]}\n  - {name: w, shape: [16, 8]}\nops:\n"
     "  - {name: h, op: linear, args: [x, w]}\n  - {name: c, op: cast, args: [h], dtype: f64}\n"
     "outputs: [c]\n",
     "cast 'c': 'dtype' must be \"f32\", \"bf16\" or \"f16\", got \"f64\"", 6, "{"},
    {"cast without a dtype",
     "inputs:\n  - {name: x, shape: [4, 8]}\n  - {name: w, shape: [16, 8]}\nops:\n"
     "  - {name: h, op: linear, args: [x, w]}\n  - {name: c, op: cast, args: [h]}\noutputs: [c]\n",
     "cast 'c': missing required attribute 'dtype'", 6, "{"},
    {"clamp bounds reversed",
     "inputs:\n  - {name: x, shape: [4, 8]}\n  - {name: w, shape: [16, 8]}\nops:\n"
     "  - {name: h, op: linear, args: [x, w]}\n  - {name: c, op: clamp, args: [h], min: 2, max: 1}\n"
     "outputs: [c]\n",
     "clamp 'c': 'min' (2.0) is greater than 'max' (1.0)", 6, "{"},
    {"bad dtype for the precision",
     "precision: bf16\ninputs:\n  - {name: x, shape: [4, 8], dtype: f32}\n  - {name: w, shape: [16, 8]}\nops:\n"
     "  - {name: h, op: linear, args: [x, w]}\noutputs: [h]\n",
     "linear 'h': operand 'x' is f32 but precision bf16 needs bf16 operands", 6, "{"},
    {"two anchors",
     "inputs:\n  - {name: x, shape: [4, 8]}\n  - {name: w, shape: [8, 8]}\nops:\n"
     "  - {name: h, op: linear, args: [x, w]}\n  - {name: h2, op: linear, args: [x, w]}\n"
     "  - {name: y, op: add, args: [h, h2]}\noutputs: [y]\n",
     "linear 'h2': a second anchor op (the first is linear 'h')", 6, "{"},
    {"no anchor: an input as output",
     "inputs:\n  - {name: x, shape: [4, 8]}\nops:\n  - {name: y, op: relu, args: [x]}\noutputs: [y, x]\n",
     "output 'x' is input 'x': a graph without an anchor op must compute each output (an op, not an input)", 5,
     "x]"},
    {"op before the anchor",
     "inputs:\n  - {name: x, shape: [4, 8]}\n  - {name: w, shape: [16, 8]}\nops:\n"
     "  - {name: r, op: relu, args: [x]}\n  - {name: h, op: linear, args: [r, w]}\noutputs: [h]\n",
     "linear 'h': operand 'x' must be a graph input, not relu 'r'", 6, "{"},
    {"unused op",
     "inputs:\n  - {name: x, shape: [4, 8]}\n  - {name: w, shape: [16, 8]}\nops:\n"
     "  - {name: h, op: linear, args: [x, w]}\n  - {name: y, op: relu, args: [h]}\n"
     "  - {name: z, op: tanh, args: [h]}\noutputs: [y]\n",
     "tanh 'z' is never used (it is not an output and no op reads it)", 7, "{"},
    {"unused input",
     "inputs:\n  - {name: x, shape: [4, 8]}\n  - {name: w, shape: [16, 8]}\n  - {name: b, shape: [16]}\nops:\n"
     "  - {name: h, op: linear, args: [x, w]}\noutputs: [h]\n",
     "input 'b' is never used", 4, "{"},
    {"expand to a shape it does not broadcast to",
     "inputs:\n  - {name: x, shape: [4, 8]}\n  - {name: w, shape: [16, 8]}\nops:\n"
     "  - {name: h, op: linear, args: [x, w]}\n  - {name: e, op: expand, args: [h], shape: [3, 16]}\noutputs: [e]\n",
     "expand 'e': cannot expand [4,16] to [3,16] (PyTorch rules", 6, "{"},
    {"expand to fewer dims",
     "inputs:\n  - {name: x, shape: [4, 8]}\n  - {name: w, shape: [16, 8]}\nops:\n"
     "  - {name: h, op: linear, args: [x, w]}\n  - {name: e, op: expand, args: [h], shape: [16]}\noutputs: [e]\n",
     "expand 'e': cannot expand [4,16] to [16]", 6, "{"},
    {"expand without a shape",
     "inputs:\n  - {name: x, shape: [4, 8]}\n  - {name: w, shape: [16, 8]}\nops:\n"
     "  - {name: h, op: linear, args: [x, w]}\n  - {name: e, op: expand, args: [h]}\noutputs: [e]\n",
     "expand 'e': missing required attribute 'shape'", 6, "{"},
    {"reshape changing the element count",
     "inputs:\n  - {name: x, shape: [4, 8]}\n  - {name: w, shape: [16, 8]}\nops:\n"
     "  - {name: h, op: linear, args: [x, w]}\n  - {name: e, op: reshape, args: [h], shape: [5, 16]}\noutputs: [e]\n",
     "reshape 'e': cannot reshape [4,16] (64 elements) to [5,16] (80)", 6, "{"},
    {"reshape to a zero dim",
     "inputs:\n  - {name: x, shape: [4, 8]}\n  - {name: w, shape: [16, 8]}\nops:\n"
     "  - {name: h, op: linear, args: [x, w]}\n  - {name: e, op: reshape, args: [h], shape: [0, 64]}\noutputs: [e]\n",
     "reshape 'e': 'shape' [0,64] has a dim < 1", 6, "{"},
    {"transpose dim out of range",
     "inputs:\n  - {name: x, shape: [4, 8]}\n  - {name: w, shape: [16, 8]}\nops:\n"
     "  - {name: h, op: linear, args: [x, w]}\n  - {name: e, op: transpose, args: [h], dims: [0, 2]}\noutputs: [e]\n",
     "transpose 'e': dim 2 is out of range for the 2-D input [4,16]", 6, "{"},
    {"transpose with one dim",
     "inputs:\n  - {name: x, shape: [4, 8]}\n  - {name: w, shape: [16, 8]}\nops:\n"
     "  - {name: h, op: linear, args: [x, w]}\n  - {name: e, op: transpose, args: [h], dims: [0]}\noutputs: [e]\n",
     "transpose 'e': 'dims' must name two dims, got [0]", 6, "{"},
    {"comparison operands that do not broadcast",
     "inputs:\n  - {name: x, shape: [4, 8]}\n  - {name: w, shape: [16, 8]}\n  - {name: b, shape: [8]}\nops:\n"
     "  - {name: h, op: linear, args: [x, w]}\n  - {name: e, op: gt, args: [h, b]}\noutputs: [e]\n",
     "gt 'e': shapes [4,16] and [8] do not broadcast", 7, "{"},
    {"conv2d_weight_grad: grad not the conv's output shape",
     "inputs:\n  - {name: x, shape: [2, 8, 12, 12]}\n  - {name: dz, shape: [2, 16, 11, 10]}\nops:\n"
     "  - {name: dw, op: conv2d_weight_grad, args: [x, dz], kernel_size: [3, 3]}\noutputs: [dw]\n",
     "conv2d_weight_grad 'dw': grad [2,16,11,10] is not the shape of the conv's output for x [2,8,12,12]: expected "
     "[2, Cout, 10, 10]", 5, "{"},
    {"conv2d_weight_grad: groups that do not divide the channels",
     "inputs:\n  - {name: x, shape: [2, 8, 12, 12]}\n  - {name: dz, shape: [2, 6, 10, 10]}\nops:\n"
     "  - {name: dw, op: conv2d_weight_grad, args: [x, dz], kernel_size: [3, 3], groups: 4}\noutputs: [dw]\n",
     "groups=4 must divide Cin=8 and Cout=6", 5, "{"},
    {"conv2d_weight_grad without kernel_size",
     "inputs:\n  - {name: x, shape: [2, 8, 12, 12]}\n  - {name: dz, shape: [2, 6, 10, 10]}\nops:\n"
     "  - {name: dw, op: conv2d_weight_grad, args: [x, dz]}\noutputs: [dw]\n",
     "kernel_size", 5, "{"},
    {"output not reached from the anchor",
     "inputs:\n  - {name: x, shape: [4, 8]}\n  - {name: w, shape: [16, 8]}\nops:\n"
     "  - {name: h, op: linear, args: [x, w]}\noutputs: [h, x]\n",
     "output 'x' does not depend on the anchor linear 'h'", 6, "x]"},
};

class SpecErrors : public ::testing::TestWithParam<BadSpec> {};

TEST_P(SpecErrors, FailsWithMessageAndLocation) {
  const BadSpec& c = GetParam();
  Expected<Graph> g = Error("not run");
  ASSERT_NO_THROW(g = parse_spec(c.yaml, "bad.yaml"));
  ASSERT_FALSE(g.ok()) << "parsed a bad spec";
  const Error& e = g.error();
  EXPECT_NE(e.message.find(c.message), std::string::npos)
      << "message: " << e.message << "\nexpected to contain: " << c.message;
  EXPECT_EQ(e.loc.file, "bad.yaml") << e.str();
  EXPECT_EQ(e.loc.line, c.line) << e.str();
  if (*c.at) {
    const int col = column_of(c.yaml, c.line, c.at);
    ASSERT_GT(col, 0) << "bad test: '" << c.at << "' is not on line " << c.line;
    EXPECT_EQ(e.loc.col, col) << e.str() << "\nexpected to point at '" << c.at << "'";
  }
  // Error::str() leads with file:line:col so editors can jump there.
  EXPECT_EQ(e.str().rfind("bad.yaml:" + std::to_string(c.line) + ":", 0), 0u) << e.str();
}

std::string case_name(const ::testing::TestParamInfo<BadSpec>& info) {
  std::string name;
  for (const char* p = info.param.label; *p; ++p)
    name += std::isalnum(static_cast<unsigned char>(*p)) ? *p : '_';
  return std::to_string(info.index) + "_" + name;
}

INSTANTIATE_TEST_SUITE_P(Table, SpecErrors, ::testing::ValuesIn(kCases), case_name);

TEST(SpecErrorsExtra, DeepNestingIsAnErrorNotACrash) {
  const std::string text = "inputs: " + std::string(100000, '[') + std::string(100000, ']') + "\n";
  Expected<Graph> g = Error("not run");
  ASSERT_NO_THROW(g = parse_spec(text, "deep.yaml"));
  ASSERT_FALSE(g.ok());
  EXPECT_NE(g.error().message.find("too deep"), std::string::npos) << g.error().str();
}

TEST(SpecErrorsTable, IsLargeEnough) { EXPECT_GE(std::size(kCases), 40u); }

}  // namespace
}  // namespace fusejit
