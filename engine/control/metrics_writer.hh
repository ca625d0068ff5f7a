// Prometheus text exposition (format 0.0.4), written by hand: samples are
// grouped by metric family, each family once with its HELP and TYPE lines,
// label values and help texts escaped. Every name gets the `sluice_` prefix.
#pragma once
#include <map>
#include <string>
#include <vector>

#include "engine/runtime/element_runtime.hh"

namespace sluice {

class MetricsWriter : public MetricSink {
 public:
  // Labels put before a sample's own from now on (an element's lane and name).
  void set_context(Labels labels) { context_ = std::move(labels); }

  void counter(const std::string &name, const std::string &help, double value, const Labels &labels = {}) override;
  void gauge(const std::string &name, const std::string &help, double value, const Labels &labels = {}) override;
  void histogram(const std::string &name, const std::string &help,
                 const std::vector<std::pair<double, uint64_t>> &buckets, double sum, uint64_t count,
                 const Labels &labels = {}) override;
  // Samples throw std::logic_error for a metric given two types or a name
  // Prometheus does not allow: a bug, never input.

  // A `# ` line of its own, outside any family.
  void comment(const std::string &text);
  // The whole exposition.
  std::string text() const;

 private:
  struct Family {
    std::string help, type;
    std::vector<std::string> samples;
  };
  Family &family(const std::string &name, const std::string &help, const char *type);
  std::string label_text(const Labels &labels, const char *extra_name = nullptr, const std::string &extra = "") const;

  Labels context_;
  std::vector<std::string> order_;  // family names, first use first
  std::map<std::string, Family> families_;
  std::vector<std::string> comments_;
};

// Prometheus's own text for a sample value: integers exactly, +Inf, NaN.
std::string metric_value_text(double v);

}  // namespace sluice
