// An inference-style server that links faultline: a pool of worker threads
// serves requests that arrive over a Unix socket, each worker tagging the
// request it serves with a thread-scoped crash key. A "poisoned" request
// makes a worker crash in a native "kernel"; the report names the request.
//
//   server SOCKET_PATH [WORKERS]
//   request line:  <id> <payload>\n      reply: <id> ok <checksum>\n
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <deque>
#include <faultline/faultline.hpp>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace {

struct Connection {
  int fd;
  std::mutex write_lock;
};

struct Job {
  std::shared_ptr<Connection> conn;
  std::string id;
  std::string payload;
};

std::mutex g_lock;
std::condition_variable g_ready;
std::deque<Job> g_queue;

// The "model": a checksum of the payload. A poisoned payload takes the code
// path with the bug (a bad index into the weights).
__attribute__((noinline)) long run_kernel(const std::string& payload, const float* weights) {
  long sum = 0;
  for (char c : payload) sum = sum * 31 + c;
  // A poisoned payload selects an adapter whose weights were never loaded.
  volatile const float* adapter = payload == "poison" ? nullptr : weights;
  sum += static_cast<long>(adapter[7]);
  return sum;
}

void worker(int index) {
  std::vector<float> weights(1024, 0.5f);
  std::string name = "worker-" + std::to_string(index);
  faultline::ScopedAnnotation who("worker", name.c_str());
  for (;;) {
    Job job;
    {
      std::unique_lock<std::mutex> lock(g_lock);
      g_ready.wait(lock, [] { return !g_queue.empty(); });
      job = std::move(g_queue.front());
      g_queue.pop_front();
    }
    faultline::ScopedAnnotation request("request_id", job.id.c_str());
    long result = run_kernel(job.payload, weights.data());
    std::string reply = job.id + " ok " + std::to_string(result) + "\n";
    std::lock_guard<std::mutex> lock(job.conn->write_lock);
    (void)!write(job.conn->fd, reply.data(), reply.size());
  }
}

void read_requests(std::shared_ptr<Connection> conn) {
  std::string buffer;
  char chunk[4096];
  for (;;) {
    ssize_t n = read(conn->fd, chunk, sizeof chunk);
    if (n <= 0) break;
    buffer.append(chunk, static_cast<size_t>(n));
    size_t nl;
    while ((nl = buffer.find('\n')) != std::string::npos) {
      std::string line = buffer.substr(0, nl);
      buffer.erase(0, nl + 1);
      size_t sp = line.find(' ');
      if (sp == std::string::npos) continue;
      std::lock_guard<std::mutex> lock(g_lock);
      g_queue.push_back(Job{conn, line.substr(0, sp), line.substr(sp + 1)});
      g_ready.notify_one();
    }
  }
  close(conn->fd);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: server SOCKET_PATH [WORKERS]\n");
    return 2;
  }
  faultline::Options options;  // FAULTLINE_DIR etc. still apply
  if (faultline::install(options) != 0) std::fprintf(stderr, "faultline: install failed\n");
  faultline::annotate("service", "example-inference-server");
  faultline::annotate("model", "checksum-v1");

  int workers = argc > 2 ? std::atoi(argv[2]) : 4;
  for (int i = 0; i < workers; ++i) std::thread(worker, i).detach();

  int listener = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::snprintf(addr.sun_path, sizeof addr.sun_path, "%s", argv[1]);
  unlink(argv[1]);
  if (bind(listener, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
      listen(listener, 64) != 0) {
    std::perror("bind/listen");
    return 1;
  }
  std::printf("listening on %s with %d workers\n", argv[1], workers);
  std::fflush(stdout);
  for (;;) {
    int fd = accept4(listener, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) continue;
    auto conn = std::make_shared<Connection>();
    conn->fd = fd;
    std::thread(read_requests, conn).detach();
  }
}
