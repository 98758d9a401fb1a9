// A test program for the symbolizer: built with -O2 -g so that GCC inlines
// small functions into their callers, across namespaces, classes, templates
// and the standard library. The agreement test picks random addresses inside
// its functions and compares faultline symbolize with llvm-symbolizer-14.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <numeric>
#include <string>
#include <vector>

namespace geometry {

struct Point {
  double x, y;
};

inline double dot(const Point& a, const Point& b) { return a.x * b.x + a.y * b.y; }
inline Point scale(const Point& p, double k) { return {p.x * k, p.y * k}; }
inline Point add(const Point& a, const Point& b) { return {a.x + b.x, a.y + b.y}; }

__attribute__((noinline)) double norm2(const std::vector<Point>& pts) {
  double s = 0;
  for (const auto& p : pts) s += dot(p, p);
  return s;
}

__attribute__((noinline)) Point centroid(const std::vector<Point>& pts) {
  Point c{0, 0};
  for (const auto& p : pts) c = add(c, p);
  return pts.empty() ? c : scale(c, 1.0 / static_cast<double>(pts.size()));
}

class Polygon {
 public:
  explicit Polygon(std::vector<Point> pts) : pts_(std::move(pts)) {}
  __attribute__((noinline)) double area() const {
    double a = 0;
    for (size_t i = 0; i < pts_.size(); ++i) a += cross(pts_[i], pts_[(i + 1) % pts_.size()]);
    return a / 2;
  }
  __attribute__((noinline)) Point shifted_centroid(double dx) const {
    return add(centroid(pts_), Point{dx, 0});
  }

 private:
  static double cross(const Point& a, const Point& b) { return a.x * b.y - a.y * b.x; }
  std::vector<Point> pts_;
};

}  // namespace geometry

namespace text {

template <typename T>
struct Counter {
  std::map<T, int> counts;
  void add(const T& v) { ++counts[v]; }
  int most() const {
    int best = 0;
    for (const auto& kv : counts) best = std::max(best, kv.second);
    return best;
  }
};

static inline bool is_vowel(char c) {
  switch (c) {
    case 'a': case 'e': case 'i': case 'o': case 'u':
      return true;
    default:
      return false;
  }
}

static inline int vowels(const std::string& s) {
  int n = 0;
  for (char c : s) n += is_vowel(c);
  return n;
}

__attribute__((noinline)) int score(const std::vector<std::string>& words) {
  Counter<std::string> counter;
  int total = 0;
  for (const auto& w : words) {
    counter.add(w);
    total += vowels(w) * static_cast<int>(w.size());
  }
  return total + counter.most();
}

__attribute__((noinline)) std::string join(const std::vector<std::string>& words, char sep) {
  std::string out;
  for (size_t i = 0; i < words.size(); ++i) {
    if (i) out += sep;
    out += words[i];
  }
  return out;
}

struct ByLength {
  bool operator()(const std::string& a, const std::string& b) const {
    return a.size() < b.size() || (a.size() == b.size() && a < b);
  }
};

__attribute__((noinline)) std::vector<std::string> sorted(std::vector<std::string> words) {
  std::sort(words.begin(), words.end(), ByLength());
  return words;
}

}  // namespace text

namespace numeric {

static inline unsigned mix(unsigned h, unsigned v) {
  h ^= v + 0x9e3779b9u + (h << 6) + (h >> 2);
  return h;
}

static inline unsigned hash_all(const std::vector<unsigned>& v) {
  unsigned h = 0;
  for (unsigned x : v) h = mix(h, x);
  return h;
}

template <int N>
__attribute__((noinline)) long unrolled(const long* p) {
  long s = 0;
  for (int i = 0; i < N; ++i) s += p[i] * (i + 1);
  return s;
}

__attribute__((noinline)) unsigned checksum(int n) {
  std::vector<unsigned> v(static_cast<size_t>(n));
  std::iota(v.begin(), v.end(), 1u);
  return hash_all(v);
}

__attribute__((noinline)) long series(int n) {
  std::vector<long> v(static_cast<size_t>(n) + 16, 3);
  return unrolled<4>(v.data()) + unrolled<16>(v.data()) +
         std::accumulate(v.begin(), v.end(), 0L);
}

}  // namespace numeric

int main(int argc, char** argv) {
  std::vector<geometry::Point> pts;
  for (int i = 0; i < 8 + argc; ++i) pts.push_back({std::rand() % 100 * 1.0, i * 2.0});
  geometry::Polygon poly(pts);
  std::vector<std::string> words;
  for (int i = 0; i < argc; ++i) words.push_back(argv[i]);
  words.push_back("inline");
  words.push_back("symbolizer");
  auto s = text::sorted(words);
  std::printf("%f %f %f %d %s %u %ld\n", geometry::norm2(pts), poly.area(),
              poly.shifted_centroid(1.5).x, text::score(s), text::join(s, ',').c_str(),
              numeric::checksum(argc + 10), numeric::series(argc + 5));
  return 0;
}
