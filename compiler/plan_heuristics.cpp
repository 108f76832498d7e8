// parse_heuristics: the codegen config string ("key=value,...") as the
// planner's Heuristics, with an error naming the bad key or value.
#include <sstream>
#include <string>

#include "compiler/plan.h"

namespace fusejit::cg {

namespace {
bool parse_int(const std::string& s, int64_t& out) {
  if (s.empty()) return false;
  size_t pos = 0;
  try {
    out = std::stoll(s, &pos);
  } catch (...) {
    return false;
  }
  return pos == s.size();
}
}  // namespace

Expected<Heuristics> parse_heuristics(const std::string& config) {
  Heuristics h;
  std::string text = config;
  for (char& c : text)
    if (c == ',' || c == ';') c = ' ';
  std::istringstream in(text);
  std::string item;
  while (in >> item) {
    size_t eq = item.find('=');
    if (eq == std::string::npos) return Error("codegen config: expected key=value, got '" + item + "'");
    std::string key = item.substr(0, eq), val = item.substr(eq + 1);
    int64_t num = 0;
    if (key == "mainloop") {
      if (val != "auto" && val != "ffma" && val != "wgmma" && val != "mma")
        return Error("codegen config: mainloop must be auto, ffma, wgmma or mma, got '" + val + "'");
      h.mainloop = val;
    } else if (key == "wgmma_tile") {
      std::vector<int64_t> parts;
      std::string part;
      std::istringstream ps(val);
      while (std::getline(ps, part, 'x')) {
        if (!parse_int(part, num) || num < 1 || num > 4096)
          return Error("codegen config: wgmma_tile must be BMxBNxSTAGES[xGROUP], got '" + val + "'");
        parts.push_back(num);
      }
      if (parts.size() != 3 && parts.size() != 4)
        return Error("codegen config: wgmma_tile must be BMxBNxSTAGES[xGROUP], got '" + val + "'");
      WgmmaConfig t;
      t.bm = static_cast<int>(parts[0]);
      t.bn = static_cast<int>(parts[1]);
      t.stages = static_cast<int>(parts[2]);
      if (parts.size() == 4) t.raster_group = static_cast<int>(parts[3]);
      WgmmaConfig swapped = t;  // (valid as either: whether the tile is swap-AB is known once planned)
      swapped.swap_ab = true;
      WgmmaConfig swapped_dw = swapped;  // the swap-AB dW's: 192 columns over one box of x
      swapped_dw.b_row_bytes = 144;
      swapped_dw.b_rows = 64;
      if (Status s = validate_wgmma(t, false); !s)
        if (Status sw = validate_wgmma(swapped, false); !sw && !(t.bn == 192 && validate_wgmma(swapped_dw, false)))
          return Error("codegen config: " + s.error().message + " (as a swap-AB tile: " + sw.error().message + ")");
      h.wgmma = t;
    } else if (key == "wgmma_schedule") {
      if (val != "auto" && val != "cooperative" && val != "pingpong")
        return Error("codegen config: wgmma_schedule must be auto, cooperative or pingpong, got '" + val + "'");
      h.wgmma_schedule = val;
    } else if (key == "scratch_dtype") {
      if (val != "f32" && val != "graph")
        return Error("codegen config: scratch_dtype must be f32 or graph, got '" + val + "'");
      h.scratch_graph_dtype = val == "graph";
    } else if (key == "tma_store") {
      if (val != "0" && val != "1" && val != "auto")
        return Error("codegen config: tma_store must be 0, 1 or auto, got '" + val + "'");
      h.tma_store = val == "auto" ? -1 : val == "1";
    } else if (key == "mma_tile") {
      std::vector<int64_t> parts;
      std::string part;
      std::istringstream ps(val);
      while (std::getline(ps, part, 'x')) {
        if (!parse_int(part, num) || num < 1 || num > 4096)
          return Error("codegen config: mma_tile must be BMxBNxSTAGES[xWARPN], got '" + val + "'");
        parts.push_back(num);
      }
      if (parts.size() != 3 && parts.size() != 4)
        return Error("codegen config: mma_tile must be BMxBNxSTAGES[xWARPN], got '" + val + "'");
      MmaConfig t;
      t.bm = static_cast<int>(parts[0]);
      t.bn = static_cast<int>(parts[1]);
      t.stages = static_cast<int>(parts[2]);
      if (parts.size() == 4) t.warp_n = static_cast<int>(parts[3]);
      if (Status s = validate_mma(t); !s) return Error("codegen config: mma_tile: " + s.error().message);
      h.mma = t;
    } else if (key == "gemv_tile") {
      std::vector<int64_t> parts;
      std::string part;
      std::istringstream ps(val);
      while (std::getline(ps, part, 'x')) {
        if (!parse_int(part, num) || num < 1 || num > 4096)
          return Error("codegen config: gemv_tile must be BNxBKxTNxGROUPS[xSTAGES], got '" + val + "'");
        parts.push_back(num);
      }
      if (parts.size() != 4 && parts.size() != 5)
        return Error("codegen config: gemv_tile must be BNxBKxTNxGROUPS[xSTAGES], got '" + val + "'");
      TileConfig t;  // bm = tm = the groups until the rows are known (pass_schedule_gemv.cpp)
      t.gemv = true;
      t.bn = static_cast<int>(parts[0]);
      t.bk = static_cast<int>(parts[1]);
      t.tn = static_cast<int>(parts[2]);
      t.bm = static_cast<int>(parts[3]);
      t.tm = 1;
      t.stages = parts.size() == 5 ? static_cast<int>(parts[4]) : 4;
      if (Status s = validate_tile(t); !s) return Error("codegen config: gemv_tile: " + s.error().message);
      h.gemv_tile = t;
    } else if (key == "split_k") {
      if (!parse_int(val, num) || num < 1 || num > 1024)
        return Error("codegen config: split_k must be an integer in [1, 1024], got '" + val + "'");
      h.split_k = static_cast<int>(num);
    } else if (key == "split_from") {
      if (!parse_int(val, num) || num < 0)
        return Error("codegen config: split_from must be a tile index >= 0, got '" + val + "'");
      h.split_from = num;
    } else if (key == "wgmma_cluster") {
      if (val != "1" && val != "2") return Error("codegen config: wgmma_cluster must be 1 or 2, got '" + val + "'");
      h.wgmma_cluster = val == "2" ? 2 : 1;
    } else if (key == "wgmma_swap_ab") {
      if (val != "0" && val != "1") return Error("codegen config: wgmma_swap_ab must be 0 or 1, got '" + val + "'");
      h.wgmma_swap_ab = val == "1";
    } else if (key == "tma_slots") {
      if (!parse_int(val, num) || num < 1 || num > 8)
        return Error("codegen config: tma_slots must be an integer in [1, 8], got '" + val + "'");
      h.tma_slots = static_cast<int>(num);
    } else if (key == "tile") {
      std::vector<int64_t> parts;
      std::string part;
      std::istringstream ps(val);
      while (std::getline(ps, part, 'x')) {
        if (!parse_int(part, num) || num < 1 || num > 4096)
          return Error("codegen config: tile must be BMxBNxTMxTN[xBK], got '" + val + "'");
        parts.push_back(num);
      }
      if (parts.size() != 4 && parts.size() != 5)
        return Error("codegen config: tile must be BMxBNxTMxTN or BMxBNxTMxTNxBK, got '" + val + "'");
      TileConfig t;
      if (parts.size() == 5) t.bk = static_cast<int>(parts[4]);
      t.bm = static_cast<int>(parts[0]);
      t.bn = static_cast<int>(parts[1]);
      t.tm = static_cast<int>(parts[2]);
      t.tn = static_cast<int>(parts[3]);
      if (Status s = validate_tile(t); !s) return Error("codegen config: " + s.error().message);
      h.tile = t;
    } else if (key == "mma_min_blocks") {
      if (!parse_int(val, num) || num < 1 || num > 32)
        return Error("codegen config: mma_min_blocks must be an integer in [1, 32], got '" + val + "'");
      h.mma_min_blocks = static_cast<int>(num);
    } else if (key == "conv_patch") {
      if (val != "0" && val != "1") return Error("codegen config: conv_patch must be 0 or 1, got '" + val + "'");
      h.conv_patch = val == "1";
    } else if (key == "conv_runs") {
      if (!parse_int(val, num) || num < 0 || num > 4)
        return Error("codegen config: conv_runs must be the most outputs the runs epilogue takes, 0 to 4, got '" + val + "'");
      h.conv_runs = static_cast<int>(num);
    } else if (key == "conv_halo") {
      if (val != "0" && val != "1" && val != "2")
        return Error("codegen config: conv_halo must be 0, 1 (the filter resident) or 2 (streamed), got '" + val + "'");
      h.conv_halo = val != "0";
      h.conv_halo_stream = val == "2";
    } else if (key == "conv_nchw") {
      if (val != "0" && val != "1" && val != "2")
        return Error("codegen config: conv_nchw must be 0, 1 or 2 (k-tiles of loads in flight), got '" + val + "'");
      h.conv_nchw = val[0] - '0';
    } else if (key == "halo_pipeline") {
      if (val != "0" && val != "1") return Error("codegen config: halo_pipeline must be 0 or 1, got '" + val + "'");
      h.halo_pipeline = val == "1";
    } else if (key == "halo_prefetch") {
      if (val != "0" && val != "1") return Error("codegen config: halo_prefetch must be 0 or 1, got '" + val + "'");
      h.halo_prefetch = val == "1";
    } else if (key == "gemv") {
      if (val != "0" && val != "1") return Error("codegen config: gemv must be 0 or 1, got '" + val + "'");
      h.gemv = val == "1";
    } else if (key == "wgrad_flat") {
      if (val != "0" && val != "1") return Error("codegen config: wgrad_flat must be 0 or 1, got '" + val + "'");
      h.wgrad_flat = val == "1";
    } else if (key == "wgrad_nhwc") {
      if (val != "0" && val != "1") return Error("codegen config: wgrad_nhwc must be 0 or 1, got '" + val + "'");
      h.wgrad_nhwc = val == "1";
    } else if (key == "fuse_pool" || key == "fuse_reductions" || key == "conv_tap_table" || key == "simplify" ||
               key == "pool_first" || key == "softmax_parts" || key == "row_pass" || key == "pool_pass" ||
               key == "pointwise_lanes" || key == "epilogue_transpose" || key == "row_stages" || key == "norm_tail" || key == "norm_epilogue" ||
               key == "norm_cache" ||
               key == "row_broadcast" || key == "row_cluster" || key == "epilogue_pairs" || key == "epilogue_direct" ||
               key == "pool_registers" || key == "pool1d_overlap" ||
               key == "staging_prefetch" || key == "atomic_partials") {
      if (val != "0" && val != "1") return Error("codegen config: " + key + " must be 0 or 1");
      (key == "fuse_pool"         ? h.fuse_pool
       : key == "pool_first"      ? h.pool_first
       : key == "pool1d_overlap"  ? h.pool1d_overlap
       : key == "pool_registers"  ? h.pool_registers
       : key == "staging_prefetch" ? h.staging_prefetch
       : key == "fuse_reductions" ? h.fuse_reductions
       : key == "atomic_partials" ? h.atomic_partials
       : key == "softmax_parts"   ? h.softmax_parts
       : key == "simplify"        ? h.simplify
       : key == "row_pass"        ? h.row_pass
       : key == "pool_pass"       ? h.pool_pass
       : key == "epilogue_transpose" ? h.epilogue_transpose
       : key == "row_stages"      ? h.row_stages
       : key == "norm_tail"       ? h.norm_tail
       : key == "norm_epilogue"   ? h.norm_epilogue
       : key == "norm_cache"      ? h.norm_cache
       : key == "row_broadcast"   ? h.row_broadcast
       : key == "row_cluster"     ? h.row_cluster
       : key == "epilogue_pairs"  ? h.epilogue_pairs
       : key == "epilogue_direct" ? h.epilogue_direct
       : key == "pointwise_lanes" ? h.pointwise.lanes
                                  : h.conv_tap_table) = val == "1";
    } else if (key == "spatial_cluster") {
      if (val == "auto") {
        h.spatial_cluster = -1;
      } else {
        if (!parse_int(val, num) || num < 0 || num > 16)
          return Error("codegen config: spatial_cluster must be 0 (off), auto or a cluster size of 1 to 16 blocks, "
                       "got '" + val + "'");
        h.spatial_cluster = static_cast<int>(num);
      }
    } else if (key == "pointwise_threads" || key == "row_threads") {
      if (!parse_int(val, num) || num < 32 || num > 1024 || num % 32)
        return Error("codegen config: " + key + " must be a multiple of 32 in [32, 1024]");
      (key == "pointwise_threads" ? h.pointwise.threads : h.row.threads) = static_cast<int>(num);
    } else {
      return Error("codegen config: unknown key '" + key +
                   "' (known: mainloop, tile, gemv, gemv_tile, wgmma_tile, wgmma_schedule, wgmma_cluster, wgmma_swap_ab, tma_store, mma_tile, split_k, split_from, tma_slots, mma_min_blocks, conv_patch, conv_halo, wgrad_nhwc, wgrad_flat, halo_pipeline, halo_prefetch, conv_nchw, staging_prefetch, fuse_pool, pool1d_overlap, pool_first, pool_registers, fuse_reductions, atomic_partials, spatial_cluster, softmax_parts, conv_tap_table, simplify, row_pass, pool_pass, epilogue_transpose, row_stages, norm_tail, norm_cache, norm_epilogue, row_broadcast, row_cluster, epilogue_pairs, epilogue_direct, conv_runs, pointwise_threads, pointwise_lanes, row_threads, scratch_dtype)");
    }
  }
  return h;
}

}  // namespace fusejit::cg
