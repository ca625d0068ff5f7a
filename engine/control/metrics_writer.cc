#include "engine/control/metrics_writer.hh"

#include <cctype>
#include <cmath>
#include <cstdio>
#include <stdexcept>

namespace sluice {

namespace {

bool valid_name(const std::string &n, bool metric) {
  if (n.empty() || std::isdigit(static_cast<unsigned char>(n[0]))) return false;
  for (char c : n)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_' || (metric && c == ':'))) return false;
  return true;
}

// In label values: backslash, double quote and newline; in HELP: backslash and newline.
std::string escape(const std::string &s, bool quote) {
  std::string o;
  for (char c : s) {
    if (c == '\\') o += "\\\\";
    else if (c == '\n') o += "\\n";
    else if (c == '"' && quote) o += "\\\"";
    else o += c;
  }
  return o;
}

}  // namespace

std::string metric_value_text(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  char buf[40];
  if (v == std::floor(v) && std::fabs(v) < 1e15) snprintf(buf, sizeof buf, "%.0f", v);
  else snprintf(buf, sizeof buf, "%.9g", v);
  return buf;
}

MetricsWriter::Family &MetricsWriter::family(const std::string &name, const std::string &help, const char *type) {
  if (!valid_name(name, true)) throw std::logic_error("bad metric name '" + name + "'");
  auto [it, added] = families_.try_emplace(name);
  if (added) {
    it->second.help = help;
    it->second.type = type;
    order_.push_back(name);
  } else if (it->second.type != type) {
    throw std::logic_error("metric '" + name + "' is a " + it->second.type + " and a " + type);
  }
  return it->second;
}

std::string MetricsWriter::label_text(const Labels &labels, const char *extra_name, const std::string &extra) const {
  std::string out;
  auto add = [&](const std::string &k, const std::string &v) {
    if (!valid_name(k, false)) throw std::logic_error("bad label name '" + k + "'");
    out += (out.empty() ? "" : ",") + k + "=\"" + escape(v, true) + "\"";
  };
  for (const auto &[k, v] : context_) add(k, v);
  for (const auto &[k, v] : labels) add(k, v);
  if (extra_name) add(extra_name, extra);
  return out.empty() ? "" : "{" + out + "}";
}

void MetricsWriter::counter(const std::string &name, const std::string &help, double value, const Labels &labels) {
  family(name, help, "counter").samples.push_back("sluice_" + name + label_text(labels) + " " + metric_value_text(value));
}

void MetricsWriter::gauge(const std::string &name, const std::string &help, double value, const Labels &labels) {
  family(name, help, "gauge").samples.push_back("sluice_" + name + label_text(labels) + " " + metric_value_text(value));
}

void MetricsWriter::histogram(const std::string &name, const std::string &help,
                              const std::vector<std::pair<double, uint64_t>> &buckets, double sum, uint64_t count,
                              const Labels &labels) {
  Family &f = family(name, help, "histogram");
  std::string base = "sluice_" + name;
  for (const auto &[le, n] : buckets)
    f.samples.push_back(base + "_bucket" + label_text(labels, "le", metric_value_text(le)) + " " + std::to_string(n));
  f.samples.push_back(base + "_bucket" + label_text(labels, "le", "+Inf") + " " + std::to_string(count));
  f.samples.push_back(base + "_sum" + label_text(labels) + " " + metric_value_text(sum));
  f.samples.push_back(base + "_count" + label_text(labels) + " " + std::to_string(count));
}

void MetricsWriter::comment(const std::string &text) { comments_.push_back("# " + escape(text, false)); }

std::string MetricsWriter::text() const {
  std::string out;
  for (const std::string &c : comments_) out += c + "\n";
  for (const std::string &name : order_) {
    const Family &f = families_.at(name);
    out += "# HELP sluice_" + name + " " + escape(f.help, false) + "\n";
    out += "# TYPE sluice_" + name + " " + f.type + "\n";
    for (const std::string &s : f.samples) out += s + "\n";
  }
  return out;
}

}  // namespace sluice
