// Prometheus text exposition format, the two pieces that must be exact:
// numbers in their shortest form that reads back to the same double (a
// cost sum of 1234567.5 is not "1.23457e+06") and label values escaped.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>

namespace ot::gate {

// Shortest round-trip form (std::to_chars); NaN, +Inf, -Inf as Prometheus spells them.
void prom_number(std::string& out, double v);
void prom_number(std::string& out, std::uint64_t v);
// `"value"` with \, " and newline escaped as the format requires.
void prom_label(std::string& out, std::string_view v);

// One sample line: name{k1="v1",k2="v2"} value\n (labels may be empty).
struct PromLabel {
    std::string_view key, value;
};
void prom_sample(std::string& out, std::string_view name, std::initializer_list<PromLabel> labels, double v);
void prom_sample(std::string& out, std::string_view name, std::initializer_list<PromLabel> labels, std::uint64_t v);
// # HELP and # TYPE lines.
void prom_family(std::string& out, std::string_view name, std::string_view type, std::string_view help);

}  // namespace ot::gate
