// The CPU backend's runtime (runtime/cpu/): the thread pool, and hand-written
// LLVM IR compiled (O3 -> object), linked in the JIT and run, independent of
// the LLVM codegen. Built only with FUSEJIT_ENABLE_LLVM.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cmath>
#include <cstdlib>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

#include "runtime/cpu/cpu_executable.h"

namespace fusejit::cpu {
namespace {

// ---- thread pool ---------------------------------------------------------------

TEST(CpuThreadPool, CoversEveryItemOnceInChunksOfAtLeastGrain) {
  for (int64_t items : std::vector<int64_t>{0, 1, 2, 3, 7, 64, 1000, 4097, 100003}) {
    for (int64_t grain : {int64_t(-1), int64_t(1), int64_t(3), int64_t(64), int64_t(1000), int64_t(1) << 40}) {
      std::vector<std::atomic<int>> seen(static_cast<size_t>(items));
      std::atomic<bool> short_chunk{false};
      parallel_for(items, grain, [&](int64_t b, int64_t e) {
        if (e - b < std::max<int64_t>(grain, 1) && e != items) short_chunk = true;
        for (int64_t i = b; i < e; ++i) seen[i].fetch_add(1);
      });
      for (int64_t i = 0; i < items; ++i) ASSERT_EQ(seen[i].load(), 1) << "items " << items << " grain " << grain << " i " << i;
      EXPECT_FALSE(short_chunk) << "items " << items << " grain " << grain;
    }
  }
}

TEST(CpuThreadPool, ConcurrentAndNestedCalls) {
  constexpr int kCallers = 4;
  constexpr int64_t kItems = 2000;
  std::vector<std::vector<std::atomic<int>>> seen(kCallers);
  for (auto& s : seen) s = std::vector<std::atomic<int>>(kItems);
  std::vector<std::thread> callers;
  for (int c = 0; c < kCallers; ++c)
    callers.emplace_back([&, c] {
      for (int rep = 0; rep < 20; ++rep)
        parallel_for(kItems / 20, 1, [&](int64_t b, int64_t e) {
          for (int64_t i = b; i < e; ++i)  // nested: one inner call per outer item
            parallel_for(20, 2, [&](int64_t ib, int64_t ie) {
              for (int64_t j = ib; j < ie; ++j) seen[c][i * 20 + j].fetch_add(1);
            });
        });
    });
  for (auto& t : callers) t.join();
  for (int c = 0; c < kCallers; ++c)
    for (int64_t i = 0; i < kItems; ++i) ASSERT_EQ(seen[c][i].load(), 20) << c << " " << i;
}

// ctest also runs this with FUSEJIT_NUM_THREADS=3 (tests/CMakeLists.txt).
TEST(CpuThreadPoolEnv, NumThreadsFollowsEnvironment) {
  const char* env = std::getenv("FUSEJIT_NUM_THREADS");
  int want = env ? std::atoi(env) : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  EXPECT_EQ(num_threads(), want);
  std::mutex m;
  std::set<std::thread::id> ids;
  parallel_for(400, 1, [&](int64_t b, int64_t e) {
    std::this_thread::sleep_for(std::chrono::microseconds(500 * (e - b)));
    std::lock_guard<std::mutex> lock(m);
    ids.insert(std::this_thread::get_id());
  });
  EXPECT_LE(static_cast<int>(ids.size()), want);
  if (want > 1) EXPECT_GE(ids.size(), 2u) << "the pool's workers never took part";
  std::printf("[ info ] %d threads, %zu took part\n", want, ids.size());
}

// ---- compile_object + CpuExecutable ----------------------------------------------

// scale: s[i] = 2 * in0[i]; finish: out[i] = expf(s[i]) + tanhf(in1[i]) (libm
// from the process); stack: touches 6 MiB of stack per call (worker stacks).
constexpr const char* kIr = R"(
declare float @expf(float)
declare float @tanhf(float)

define void @scale(i8** %args, i64 %b, i64 %e) {
entry:
  %a0 = load i8*, i8** %args
  %in = bitcast i8* %a0 to float*
  %p1 = getelementptr i8*, i8** %args, i64 1
  %a1 = load i8*, i8** %p1
  %out = bitcast i8* %a1 to float*
  %c = icmp slt i64 %b, %e
  br i1 %c, label %loop, label %done
loop:
  %i = phi i64 [ %b, %entry ], [ %n, %loop ]
  %x = getelementptr float, float* %in, i64 %i
  %v = load float, float* %x
  %w = fmul float %v, 2.0
  %y = getelementptr float, float* %out, i64 %i
  store float %w, float* %y
  %n = add i64 %i, 1
  %k = icmp slt i64 %n, %e
  br i1 %k, label %loop, label %done
done:
  ret void
}

define void @finish(i8** %args, i64 %b, i64 %e) {
entry:
  %a0 = load i8*, i8** %args
  %s = bitcast i8* %a0 to float*
  %p1 = getelementptr i8*, i8** %args, i64 1
  %a1 = load i8*, i8** %p1
  %in = bitcast i8* %a1 to float*
  %p2 = getelementptr i8*, i8** %args, i64 2
  %a2 = load i8*, i8** %p2
  %out = bitcast i8* %a2 to float*
  %c = icmp slt i64 %b, %e
  br i1 %c, label %loop, label %done
loop:
  %i = phi i64 [ %b, %entry ], [ %n, %loop ]
  %xs = getelementptr float, float* %s, i64 %i
  %vs = load float, float* %xs
  %ex = call float @expf(float %vs)
  %xi = getelementptr float, float* %in, i64 %i
  %vi = load float, float* %xi
  %th = call float @tanhf(float %vi)
  %r = fadd float %ex, %th
  %y = getelementptr float, float* %out, i64 %i
  store float %r, float* %y
  %n = add i64 %i, 1
  %k = icmp slt i64 %n, %e
  br i1 %k, label %loop, label %done
done:
  ret void
}

define void @stack(i8** %args, i64 %b, i64 %e) {
entry:
  %buf = alloca [1572864 x float], align 64
  %a0 = load i8*, i8** %args
  %out = bitcast i8* %a0 to float*
  br label %touch
touch:
  %j = phi i64 [ 0, %entry ], [ %jn, %touch ]
  %pj = getelementptr [1572864 x float], [1572864 x float]* %buf, i64 0, i64 %j
  store volatile float 1.0, float* %pj
  %jn = add i64 %j, 1024
  %more = icmp slt i64 %jn, 1572864
  br i1 %more, label %touch, label %write
write:
  %last = getelementptr [1572864 x float], [1572864 x float]* %buf, i64 0, i64 1571840
  %v = load volatile float, float* %last
  %c = icmp slt i64 %b, %e
  br i1 %c, label %loop, label %done
loop:
  %i = phi i64 [ %b, %write ], [ %n, %loop ]
  %y = getelementptr float, float* %out, i64 %i
  store float %v, float* %y
  %n = add i64 %i, 1
  %k = icmp slt i64 %n, %e
  br i1 %k, label %loop, label %done
done:
  ret void
}
)";

std::shared_ptr<CpuProgram> test_program(int64_t n) {
  auto p = std::make_shared<CpuProgram>();
  p->name = "fj_cpu_runtime_test";
  p->llvm_module = kIr;
  CpuTarget host = host_target();
  p->target_triple = host.triple;
  p->cpu = host.cpu;
  p->features = host.features;
  p->scratch.push_back({n * 4, "2 * x"});
  p->launches.push_back({"scale", n, 16, {{BufferKind::Input, 0}, {BufferKind::Scratch, 0}}, "scale"});
  p->launches.push_back(
      {"finish", n, 16, {{BufferKind::Scratch, 0}, {BufferKind::Input, 1}, {BufferKind::Output, 0}}, "finish"});
  p->launches.push_back({"stack", n, 1, {{BufferKind::Output, 1}}, "stack"});
  return p;
}

TEST(CpuRuntime, HostTarget) {
  CpuTarget t = host_target();
  EXPECT_FALSE(t.triple.empty());
  EXPECT_FALSE(t.cpu.empty());
  EXPECT_EQ(llvm_version().rfind("14.", 0), 0u) << llvm_version();
  std::printf("[ info ] host %s cpu %s, llvm %s, %zu feature chars\n", t.triple.c_str(), t.cpu.c_str(),
              llvm_version().c_str(), t.features.size());
}

TEST(CpuRuntime, CompileLoadRun) {
  const int64_t n = 1000;
  auto program = test_program(n);
  auto t0 = std::chrono::steady_clock::now();
  auto object = compile_object(*program);
  ASSERT_TRUE(object) << object.error().message;
  auto t1 = std::chrono::steady_clock::now();
  auto exe = CpuExecutable::load(program, *object, 2, 2);
  ASSERT_TRUE(exe) << exe.error().message;
  auto t2 = std::chrono::steady_clock::now();
  std::printf("[ info ] compile_object %.1f ms (%zu bytes), load %.1f ms\n",
              std::chrono::duration<double, std::milli>(t1 - t0).count(), object->size(),
              std::chrono::duration<double, std::milli>(t2 - t1).count());

  std::vector<float> x(n), z(n), y(n, -1), s(n, 0);
  for (int64_t i = 0; i < n; ++i) {
    x[i] = 0.001f * static_cast<float>(i) - 0.3f;
    z[i] = 0.01f * static_cast<float>(i % 100) - 0.5f;
  }
  for (int rep = 0; rep < 3; ++rep) {
    Status st = (*exe)->run({x.data(), z.data()}, {y.data(), s.data()});
    ASSERT_TRUE(st) << st.error().message;
    for (int64_t i = 0; i < n; ++i)
      ASSERT_NEAR(y[i], std::exp(2.0 * x[i]) + std::tanh(static_cast<double>(z[i])), 1e-5) << i;
    for (int64_t i = 0; i < n; ++i) ASSERT_EQ(s[i], 1.0f) << i;
  }
  EXPECT_EQ((*exe)->object().size(), object->size());
}

TEST(CpuRuntime, InvalidIrIsAnError) {
  CpuProgram p = *test_program(4);
  p.llvm_module = "define void @f(i8** %a, i64 %b, i64 %e) {\n  ret i32 0\n}\n";
  auto parse = compile_object(p);
  ASSERT_FALSE(parse);
  EXPECT_NE(parse.error().message.find("invalid LLVM IR"), std::string::npos) << parse.error().message;

  // Parses, but %v does not dominate its use: only the verifier sees it.
  p.llvm_module = R"(
define void @bad(i8** %args, i64 %b, i64 %e) {
entry:
  br label %x
y:
  %v = add i64 %b, 1
  br label %x
x:
  %w = add i64 %v, 1
  ret void
}
)";
  auto verify = compile_object(p);
  ASSERT_FALSE(verify);
  EXPECT_NE(verify.error().message.find("verifier"), std::string::npos) << verify.error().message;
  EXPECT_NE(verify.error().message.find("dominate"), std::string::npos) << verify.error().message;

  p.llvm_module = kIr;
  p.target_triple = "nonsense-unknown-target";
  EXPECT_FALSE(compile_object(p));
}

TEST(CpuRuntime, LoadAndRunArgumentErrors) {
  auto program = test_program(8);
  auto object = compile_object(*program);
  ASSERT_TRUE(object) << object.error().message;

  EXPECT_FALSE(CpuExecutable::load(nullptr, *object));
  EXPECT_FALSE(CpuExecutable::load(program, {}));
  EXPECT_FALSE(CpuExecutable::load(program, {'n', 'o', 't', ' ', 'e', 'l', 'f'}));
  EXPECT_FALSE(CpuExecutable::load(program, *object, 1, 2)) << "input 1 is out of range";
  auto missing = std::make_shared<CpuProgram>(*program);
  missing->launches[0].function = "no_such_function";
  auto m = CpuExecutable::load(missing, *object);
  ASSERT_FALSE(m);
  EXPECT_NE(m.error().message.find("no_such_function"), std::string::npos) << m.error().message;

  auto exe = CpuExecutable::load(program, *object, 2, 2);
  ASSERT_TRUE(exe) << exe.error().message;
  std::vector<float> a(8), b(8), c(8), d(8);
  EXPECT_FALSE((*exe)->run({a.data()}, {c.data(), d.data()}));
  EXPECT_FALSE((*exe)->run({a.data(), b.data()}, {c.data()}));
  EXPECT_FALSE((*exe)->run({a.data(), nullptr}, {c.data(), d.data()}));
  EXPECT_FALSE((*exe)->run({a.data(), b.data()}, {nullptr, d.data()}));
  EXPECT_TRUE((*exe)->run({a.data(), b.data()}, {c.data(), d.data()}));

  // Unchecked counts: run() still refuses a buffer a launch needs but was not given.
  auto loose = CpuExecutable::load(program, *object);
  ASSERT_TRUE(loose) << loose.error().message;
  EXPECT_FALSE((*loose)->run({a.data()}, {c.data(), d.data()}));
}

}  // namespace
}  // namespace fusejit::cpu
