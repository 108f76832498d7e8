// cpu_fma_peak — measured fp32 FMA peak of this host (built with -march=native):
// each thread runs independent chains of vector FMAs of the widest native
// width (AVX-512 zmm, else AVX2 ymm). Prints one JSON line:
//   {"threads": T, "gflops": G, "gflops_1thread": G1, "vector_bits": B}
// Usage: cpu_fma_peak [threads]  (default $FUSEJIT_NUM_THREADS, else all).
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>
#include <vector>

#ifdef __AVX512F__
constexpr int kLanes = 16;   // zmm
constexpr int kChains = 16;  // 16 of 32 registers: FMA latency x 2 ports covered
#else
constexpr int kLanes = 8;    // ymm: a 64-byte vector type would live on the stack here
constexpr int kChains = 12;  // 12 of 16 registers
#endif
typedef float vec __attribute__((vector_size(kLanes * 4)));
constexpr long kIters = 20'000'000;

static float run_chains(float seed) {
  vec acc[kChains], a, b;
  for (int l = 0; l < kLanes; ++l) a[l] = 0.999999f, b[l] = seed * 1e-7f;
  for (int c = 0; c < kChains; ++c) acc[c] = a * (float)(c + 1);
  for (long i = 0; i < kIters; ++i)
#pragma GCC unroll 16
    for (int c = 0; c < kChains; ++c) acc[c] = acc[c] * a + b;  // contracted to FMA
  float s = 0;
  for (int c = 0; c < kChains; ++c) s += acc[c][0] + acc[c][kLanes - 1];
  return s;
}

static double gflops(int threads) {
  std::vector<std::thread> pool;
  std::vector<float> sink(threads);
  auto t0 = std::chrono::steady_clock::now();
  for (int t = 0; t < threads; ++t) pool.emplace_back([&, t] { sink[t] = run_chains(float(t + 1)); });
  for (auto& th : pool) th.join();
  double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (sink[0] == 12345.f) std::puts("");  // keep the results alive
  return 2.0 * kLanes * kChains * double(kIters) * threads / s / 1e9;
}

int main(int argc, char** argv) {
  const char* env = std::getenv("FUSEJIT_NUM_THREADS");
  int threads = argc > 1 ? std::atoi(argv[1]) : env ? std::atoi(env) : 0;
  if (threads <= 0) threads = static_cast<int>(std::thread::hardware_concurrency());
  gflops(1);  // warm-up (clocks)
  double one = gflops(1), all = gflops(threads);
  const int bits = kLanes * 32;
  std::printf("{\"threads\": %d, \"gflops\": %.1f, \"gflops_1thread\": %.1f, \"vector_bits\": %d}\n", threads,
              all, one, bits);
  return 0;
}
