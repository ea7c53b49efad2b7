#include "gate/prom_text.hpp"

#include <charconv>
#include <cmath>

namespace ot::gate {

void prom_number(std::string& out, double v) {
    if (std::isnan(v)) return void(out += "NaN");
    if (std::isinf(v)) return void(out += v > 0 ? "+Inf" : "-Inf");
    char buf[64];
    const auto r = std::to_chars(buf, buf + sizeof buf, v);
    out.append(buf, r.ptr);
}

void prom_number(std::string& out, std::uint64_t v) {
    char buf[24];
    const auto r = std::to_chars(buf, buf + sizeof buf, v);
    out.append(buf, r.ptr);
}

void prom_label(std::string& out, std::string_view v) {
    out += '"';
    for (char c : v) {
        if (c == '\\') out += "\\\\";
        else if (c == '"') out += "\\\"";
        else if (c == '\n') out += "\\n";
        else out += c;
    }
    out += '"';
}

namespace {
void head(std::string& out, std::string_view name, std::initializer_list<PromLabel> labels) {
    out += name;
    if (labels.size() == 0) return void(out += ' ');
    char sep = '{';
    for (const PromLabel& l : labels) {
        out += sep;
        out += l.key;
        out += '=';
        prom_label(out, l.value);
        sep = ',';
    }
    out += "} ";
}
}  // namespace

void prom_sample(std::string& out, std::string_view name, std::initializer_list<PromLabel> labels, double v) {
    head(out, name, labels);
    prom_number(out, v);
    out += '\n';
}

void prom_sample(std::string& out, std::string_view name, std::initializer_list<PromLabel> labels, std::uint64_t v) {
    head(out, name, labels);
    prom_number(out, v);
    out += '\n';
}

void prom_family(std::string& out, std::string_view name, std::string_view type, std::string_view help) {
    out += "# HELP ";
    out += name;
    out += ' ';
    out += help;
    out += "\n# TYPE ";
    out += name;
    out += ' ';
    out += type;
    out += '\n';
}

}  // namespace ot::gate
