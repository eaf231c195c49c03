// oracle is a reference for the Go codec in package ba, built from the
// libraries the B&A inference sidecar uses (rapidjson 1.1.0, Abseil). It
// reimplements the sidecar's request parsing (request_parser.cc,
// json_util.h) and PyTorch value conversion (pytorch_parser.cc Convert<T>)
// around them, so that TestOracle can compare the Go parser and number
// formatter with the real libraries on many inputs. It is not part of the
// build; see TestOracle for how to compile and use it.
//
// Modes (argv[1]), reading records from stdin and writing one line each:
//   dtoa     records: lines of 16 hex digits (float64 bits);
//            output:  rapidjson Writer::Double of the value.
//   request  records: "<length>\n<bytes>";
//            output:  a summary of the parsed request (see summarize).
//   convert  records: "<DTYPE>\n<length>\n<bytes>";
//            output:  "OK <value>" or "ERR <message>".

#include <stdexcept>

// rapidjson 1.1.0 has internal assertions that some numbers trip in
// full-precision mode (e.g. NextPositiveDouble's !Sign()); in a release
// build they are undefined behaviour. The oracle turns them into
// exceptions and reports such documents as skipped.
#define RAPIDJSON_ASSERT(x) \
  if (!(x)) throw std::logic_error("rapidjson assertion: " #x)

#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <limits>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"
#include "rapidjson/document.h"
#include "rapidjson/error/en.h"
#include "rapidjson/stringbuffer.h"
#include "rapidjson/writer.h"

namespace {

// esc writes s with bytes outside printable ASCII, '|' and '\' as \xHH.
std::string esc(const std::string& s) {
  std::string out;
  for (unsigned char c : s) {
    if (c < 0x20 || c >= 0x7f || c == '|' || c == '\\') {
      out += absl::StrFormat("\\x%02X", c);
    } else {
      out += static_cast<char>(c);
    }
  }
  return out;
}

std::string floatBits(float f) {
  if (std::isnan(f)) return std::signbit(f) ? "-nan" : "nan";
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return absl::StrFormat("%08x", u);
}

std::string doubleBits(double d) {
  if (std::isnan(d)) return std::signbit(d) ? "-nan" : "nan";
  uint64_t u;
  std::memcpy(&u, &d, 8);
  return absl::StrFormat("%016x", u);
}

// convert applies Convert<T> of the sidecar to one string; it returns false
// and sets msg on failure, else sets value to the Go-side representation.
bool convert(const std::string& dt, const std::string& s, std::string* value, std::string* msg) {
  if (dt == "FLOAT") {
    float f;
    if (!absl::SimpleAtof(s, &f)) { *msg = "Error in float conversion"; return false; }
    *value = floatBits(f);
  } else if (dt == "DOUBLE") {
    double d;
    if (!absl::SimpleAtod(s, &d)) { *msg = "Error in double conversion"; return false; }
    *value = doubleBits(d);
  } else if (dt == "INT8" || dt == "INT16") {
    int r;
    bool is8 = dt == "INT8";
    if (!absl::SimpleAtoi(s, &r)) { *msg = is8 ? "Error in int8 conversion" : "Error in int16 conversion"; return false; }
    int lo = is8 ? -128 : -32768, hi = is8 ? 127 : 32767;
    if (r < lo || r > hi) {
      *msg = is8 ? "The number is outside of bounds of int8_t." : "The number is outside of bounds of int16_t.";
      return false;
    }
    *value = std::to_string(r);
  } else if (dt == "INT32") {
    int r;
    if (!absl::SimpleAtoi(s, &r)) { *msg = "Error in int32 conversion"; return false; }
    *value = std::to_string(r);
  } else if (dt == "INT64") {
    int64_t r;
    if (!absl::SimpleAtoi(s, &r)) { *msg = "Error in int64 conversion"; return false; }
    *value = std::to_string(r);
  } else {
    *msg = "unknown dtype";
    return false;
  }
  return true;
}

using Value = rapidjson::Value;

// getString is json_util.h GetStringMember: it returns false and sets msg.
bool getString(const Value& obj, const char* name, std::string* out, std::string* msg) {
  auto it = obj.FindMember(name);
  if (it == obj.MemberEnd()) { *msg = absl::StrFormat("Missing %s in the JSON document", name); return false; }
  if (!it->value.IsString()) {
    *msg = absl::StrFormat("Value of member: %s, has unexpected member type (expected: %d, observed: %d)", name,
                           rapidjson::kStringType, it->value.GetType());
    return false;
  }
  *out = std::string(it->value.GetString());
  if (out->empty()) { *msg = absl::StrFormat("Value of member: %s, is unexpectedly an empty string.", name); return false; }
  return true;
}

// getArray is json_util.h GetArrayMember.
const Value* getArray(const Value& obj, const char* name, std::string* msg) {
  auto it = obj.FindMember(name);
  if (it == obj.MemberEnd()) { *msg = absl::StrFormat("Missing %s in the JSON document", name); return nullptr; }
  if (!it->value.IsArray()) {
    *msg = absl::StrFormat("Value of member: %s, has unexpected member type (expected: %d, observed: %d)", name,
                           rapidjson::kArrayType, it->value.GetType());
    return nullptr;
  }
  return &it->value;
}

struct Tensor {
  std::string name, dtype;
  std::vector<int> shape;
  std::vector<std::string> content;
};

// item summarises one request element: "E <path>\t<desc>", "T <path>" plus
// tensors, or "S <reason>" where the sidecar's behaviour is undefined or
// Grove deliberately differs.
std::string item(const Value& v) {
  if (!v.IsObject()) return "S item is not an object";
  std::string path, msg;
  if (!getString(v, "model_path", &path, &msg)) return "E \t" + esc(msg);
  const Value* tensors = getArray(v, "tensors", &msg);
  if (!tensors) return "E " + esc(path) + "\t" + esc(msg);
  if (tensors->Empty()) return "S empty tensors";
  std::vector<Tensor> parsed;
  for (const Value& tv : tensors->GetArray()) {
    if (!tv.IsObject()) return "S tensor is not an object";
    Tensor t;
    auto n = tv.FindMember("tensor_name");
    if (n != tv.MemberEnd() && n->value.IsString()) t.name = n->value.GetString();
    if (!getString(tv, "data_type", &t.dtype, &msg)) return "E " + esc(path) + "\t" + esc(msg);
    if (t.dtype != "FLOAT" && t.dtype != "DOUBLE" && t.dtype != "INT8" && t.dtype != "INT16" && t.dtype != "INT32" &&
        t.dtype != "INT64") {
      return "E " + esc(path) + "\t" + esc("Invalid JSON format: Unsupported 'data_type' field " + t.dtype);
    }
    const Value* shape = getArray(tv, "tensor_shape", &msg);
    if (!shape) return "E " + esc(path) + "\t" + esc(msg);
    uint64_t product = 1;
    for (const Value& d : shape->GetArray()) {
      if (d.IsDouble() && std::fabs(d.GetDouble()) >= 9223372036854775808.0 &&
          std::trunc(d.GetDouble()) == d.GetDouble()) {
        // An integer literal beyond int64, stored as a double: Grove reports
        // it as a too large product or a dimension below 1.
        return "S huge integer dimension";
      }
      if (!d.IsNumber() || d.IsDouble()) return "E " + esc(path) + "\tInvalid tensor dimension: it has to be an integer";
      if (!d.IsInt()) return "S dimension outside int range";
      int dim = d.GetInt();
      if (dim < 1) return "E " + esc(path) + "\tInvalid tensor dimension: it has to be greater than 0";
      product *= static_cast<uint64_t>(dim);
      if (product > (uint64_t{1} << 31)) return "S shape product beyond MaxElements";
      t.shape.push_back(dim);
    }
    const Value* content = getArray(tv, "tensor_content", &msg);
    if (!content) return "E " + esc(path) + "\t" + esc(msg);
    for (const Value& c : content->GetArray()) {
      if (!c.IsString()) {
        return "E " + esc(path) + "\tAll numbers within the tensor_content must be enclosed in quotes";
      }
      t.content.push_back(std::string(c.GetString(), c.GetStringLength()));
    }
    if (t.content.size() != product) {
      return "E " + esc(path) + "\t" +
             esc(absl::StrFormat("Mismatch between the size of tensor_content (%d) and a product of tensor dimensions (%d)",
                                 t.content.size(), product));
    }
    parsed.push_back(std::move(t));
  }
  std::string out = "T " + esc(path);
  for (const Tensor& t : parsed) {
    out += " " + esc(t.name) + ":" + t.dtype + ":";
    for (size_t i = 0; i < t.shape.size(); i++) out += (i ? "," : "") + std::to_string(t.shape[i]);
    out += ":";
    for (size_t i = 0; i < t.content.size(); i++) {
      std::string value;
      if (t.content[i].find('\0') != std::string::npos) return "S NUL in a content string";
      if (!convert(t.dtype, t.content[i], &value, &msg)) {
        return "E " + esc(path) + "\t" +
               esc("Input Tensor Conversion Error. Message: Model " + path + " encounters tensor parsing error: " + msg);
      }
      out += (i ? "," : "") + value;
    }
  }
  return out;
}

// summarize parses one request document as the sidecar does.
std::string summarize(const std::string& body) {
  if (body.find('\0') != std::string::npos) return "S NUL in the document";
  // Grove rejects an escaped lone low surrogate, which rapidjson would turn
  // into invalid UTF-8.
  auto escapeAt = [&](size_t i, const char* third, const char* fourth) {
    if (body[i] != '\\' || body[i + 1] != 'u' || !std::strchr(third, body[i + 2]) || !std::strchr(fourth, body[i + 3])) {
      return false;
    }
    size_t run = 0;  // a backslash escapes 'u' only after an even run of backslashes
    for (size_t k = i; k < body.size() && body[k] == '\\'; k--) {
      run++;
      if (k == 0) break;
    }
    return run % 2 == 1;
  };
  for (size_t i = 0; i + 3 < body.size(); i++) {
    if (escapeAt(i, "dD", "cdefCDEF") && !(i >= 6 && escapeAt(i - 6, "dD", "89abAB"))) {
      return "S escaped lone low surrogate";
    }
  }
  rapidjson::Document doc;
  // kParseValidateEncodingFlag: Grove rejects invalid UTF-8 (the sidecar
  // does not validate it).
  doc.Parse<rapidjson::kParseFullPrecisionFlag | rapidjson::kParseValidateEncodingFlag>(body.c_str());
  if (doc.HasParseError()) return "B " + esc(std::string("JSON Parse Error: ") + rapidjson::GetParseError_En(doc.GetParseError()));
  if (!doc.IsObject()) return "B Missing request in the JSON document";
  if (doc.FindMember("configs") != doc.MemberEnd()) return "S configs (a Grove extension)";
  std::string msg;
  const Value* request = getArray(doc, "request", &msg);
  if (!request) return "B " + esc(msg);
  std::string out = "R";
  for (const Value& v : request->GetArray()) out += " | " + item(v);
  return out;
}

bool readRecord(std::string* out) {
  std::string line;
  if (!std::getline(std::cin, line)) return false;
  size_t n = std::stoul(line);
  out->resize(n);
  std::cin.read(&(*out)[0], static_cast<std::streamsize>(n));
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  std::ios::sync_with_stdio(false);
  std::string mode = argc > 1 ? argv[1] : "";
  if (mode == "dtoa") {
    std::string line;
    while (std::getline(std::cin, line)) {
      uint64_t u = std::stoull(line, nullptr, 16);
      double d;
      std::memcpy(&d, &u, 8);
      rapidjson::StringBuffer sb;
      rapidjson::Writer<rapidjson::StringBuffer> w(sb);
      if (!w.Double(d)) {
        std::cout << "FAIL\n";
      } else {
        std::cout << sb.GetString() << "\n";
      }
    }
  } else if (mode == "request") {
    std::string body;
    while (readRecord(&body)) {
      std::string out;
      try {
        out = summarize(body);
      } catch (const std::logic_error& e) {
        out = std::string("S ") + e.what();
      }
      std::cout << out << "\n" << std::flush;
    }
  } else if (mode == "convert") {
    std::string dt;
    while (std::getline(std::cin, dt)) {
      std::string s, value, msg;
      if (!readRecord(&s)) break;
      if (convert(dt, s, &value, &msg)) {
        std::cout << "OK " << value << "\n" << std::flush;
      } else {
        std::cout << "ERR " << msg << "\n" << std::flush;
      }
    }
  } else {
    std::cerr << "usage: oracle dtoa|request|convert\n";
    return 2;
  }
  return 0;
}
