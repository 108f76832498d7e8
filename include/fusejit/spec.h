// fusejit/spec.h — the YAML fusion spec front end.
//
// A spec names the inputs (in kernel argument order), the ops (at most one
// anchor: linear, matmul or conv2d; elementwise, layout and reduction ops,
// pooling) and
// the outputs. docs/spec.md describes the format. Both calls return a prepared
// Graph (prepare_graph has run) or an Error with file:line:col; they never
// throw.
#pragma once

#include <string>
#include <string_view>

#include "fusejit/error.h"
#include "fusejit/ir.h"

namespace fusejit {

// Parses spec text. `filename` is only used in error locations.
Expected<Graph> parse_spec(std::string_view yaml_text, const std::string& filename = "<spec>");

// Reads and parses a spec file ("cannot read 'x.yaml': No such file or
// directory" when it cannot be read).
Expected<Graph> load_spec_file(const std::string& path);

}  // namespace fusejit
