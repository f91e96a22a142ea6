// bench/cpp_bundle: one JSON object on one line, built key by key.
#ifndef CUTECALL_BENCH_CPP_BUNDLE_JSON_LINE_H_
#define CUTECALL_BENCH_CPP_BUNDLE_JSON_LINE_H_

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

namespace bench {

class JsonLine {
 public:
  void Num(const std::string& key, double v) { Key(key) += Fmt(v); }
  void Int(const std::string& key, int64_t v) { Key(key) += std::to_string(v); }
  void Str(const std::string& key, const std::string& v) {
    std::string& s = Key(key);
    s += '"';
    for (char c : v) {
      if (c == '"' || c == '\\') s += '\\';
      if (static_cast<unsigned char>(c) >= 0x20) s += c;
    }
    s += '"';
  }
  void List(const std::string& key, const std::vector<double>& v) {
    std::string& s = Key(key);
    s += '[';
    for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + Fmt(v[i]);
    s += ']';
  }
  std::string Done() const { return "{" + body_ + "}"; }

 private:
  std::string& Key(const std::string& key) {
    body_ += (body_.empty() ? "\"" : ", \"") + key + "\": ";
    return body_;
  }
  static std::string Fmt(double v) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.4f", v);
    return buf;
  }
  std::string body_;
};

}  // namespace bench

#endif  // CUTECALL_BENCH_CPP_BUNDLE_JSON_LINE_H_
