// runtime/cpu/thread_pool.cpp — the process-wide pool parallel_for runs on.
//
// num_threads() - 1 workers (pthreads with 8 MiB stacks: generated kernels
// keep packed panels on the stack), created on first use and never joined
// (the pool lives until the process exits). FUSEJIT_NUM_THREADS is read once,
// then. Each parallel_for is a job in a queue: its items are cut into chunks
// (>= grain items, about 4 per thread), which the caller and idle workers claim
// with one atomic increment each; the caller waits for the chunks others
// claimed. Concurrent and nested calls are fine: a caller never waits for a
// chunk that nobody is running.
#include <pthread.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdlib>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "runtime/cpu/cpu_executable.h"
#include "runtime/log.h"

namespace fusejit::cpu {
namespace {

constexpr size_t kWorkerStack = 8u << 20;
constexpr int kMaxThreads = 1024;

int threads_from_env() {
  int hw = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  const char* env = std::getenv("FUSEJIT_NUM_THREADS");
  if (!env || !*env) return hw;
  char* end = nullptr;
  long n = std::strtol(env, &end, 10);
  if (*end != '\0' || n < 1 || n > kMaxThreads) {
    log::warn("FUSEJIT_NUM_THREADS='" + std::string(env) + "' is not a number in 1.." +
              std::to_string(kMaxThreads) + "; using " + std::to_string(hw));
    return hw;
  }
  return static_cast<int>(n);
}

struct Job {
  const std::function<void(int64_t, int64_t)>* fn = nullptr;
  int64_t items = 0, chunk = 1, chunks = 0;
  std::atomic<int64_t> next{0};  // next chunk to claim
  std::atomic<int64_t> done{0};  // chunks finished
  std::mutex m;
  std::condition_variable finished;

  // Claims and runs one chunk; false when none is left.
  bool run_one() {
    int64_t c = next.fetch_add(1, std::memory_order_relaxed);
    if (c >= chunks) return false;
    int64_t b = c * chunk;
    (*fn)(b, std::min(items, b + chunk));
    if (done.fetch_add(1, std::memory_order_acq_rel) + 1 == chunks) {
      std::lock_guard<std::mutex> lock(m);
      finished.notify_all();
    }
    return true;
  }
};

class Pool {
 public:
  explicit Pool(int threads) : threads_(threads) {
    for (int i = 1; i < threads; ++i) {
      pthread_attr_t attr;
      pthread_attr_init(&attr);
      pthread_attr_setstacksize(&attr, kWorkerStack);
      pthread_t t;
      int rc = pthread_create(&t, &attr, &Pool::main, this);
      pthread_attr_destroy(&attr);
      if (rc != 0) {  // fewer workers: the caller still runs everything it must
        log::warn("cpu thread pool: could not start worker " + std::to_string(i) + " (error " + std::to_string(rc) + ")");
        break;
      }
      pthread_detach(t);
      ++workers_;
    }
  }

  int threads() const { return threads_; }
  int workers() const { return workers_; }

  void run(const std::shared_ptr<Job>& job) {
    {
      std::lock_guard<std::mutex> lock(m_);
      jobs_.push_back(job);
    }
    if (job->chunks - 1 >= workers_) wake_.notify_all();
    else for (int64_t i = 1; i < job->chunks; ++i) wake_.notify_one();
    while (job->run_one()) {
    }
    retire(job);
    if (job->done.load(std::memory_order_acquire) != job->chunks) {
      std::unique_lock<std::mutex> lock(job->m);
      job->finished.wait(lock, [&] { return job->done.load(std::memory_order_acquire) == job->chunks; });
    }
  }

 private:
  // Takes a job with no chunks left off the queue (if still there).
  void retire(const std::shared_ptr<Job>& job) {
    std::lock_guard<std::mutex> lock(m_);
    auto it = std::find(jobs_.begin(), jobs_.end(), job);
    if (it != jobs_.end()) jobs_.erase(it);
  }

  static void* main(void* self) {
    static_cast<Pool*>(self)->loop();
    return nullptr;
  }

  void loop() {
    for (;;) {
      std::shared_ptr<Job> job;
      {
        std::unique_lock<std::mutex> lock(m_);
        wake_.wait(lock, [&] { return !jobs_.empty(); });
        job = jobs_.front();
      }
      while (job->run_one()) {
      }
      retire(job);
    }
  }

  const int threads_;
  int workers_ = 0;
  std::mutex m_;
  std::condition_variable wake_;
  std::deque<std::shared_ptr<Job>> jobs_;
};

Pool& pool() {
  static Pool* p = new Pool(threads_from_env());  // never destroyed: workers may outlive statics
  return *p;
}

}  // namespace

int num_threads() { return pool().threads(); }

void parallel_for(int64_t items, int64_t grain, const std::function<void(int64_t, int64_t)>& fn) {
  if (items <= 0) return;
  grain = std::max<int64_t>(grain, 1);
  Pool& p = pool();
  int64_t threads = p.workers() + 1;
  if (threads == 1 || items <= grain) {
    fn(0, items);
    return;
  }
  int64_t target_chunks = 4 * threads;
  int64_t chunk = std::max(grain, (items + target_chunks - 1) / target_chunks);
  int64_t chunks = (items + chunk - 1) / chunk;
  if (chunks == 1) {
    fn(0, items);
    return;
  }
  auto job = std::make_shared<Job>();
  job->fn = &fn;
  job->items = items;
  job->chunk = chunk;
  job->chunks = chunks;
  p.run(job);
}

}  // namespace fusejit::cpu
