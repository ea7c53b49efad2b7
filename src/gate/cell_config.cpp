#include "gate/cell_config.hpp"

#include <set>
#include <stdexcept>

#include "core/cost_model.hpp"
#include "gate/text.hpp"

namespace ot::gate {
namespace {

constexpr double kMinDegrees = 0.001, kMaxDegrees = 90;
constexpr int kMaxGridZoom = 24;

[[noreturn]] void bad(const std::string& where, const std::string& why) { throw std::runtime_error(where + ": " + why); }

const std::string kGridHelp = "must be a cell size in degrees (0.001 to 90, e.g. 0.1) or a zoom level written z0 to z24 "
                              "(e.g. z12: the cells are the tiles of that level)";

CellGrid parse_grid(const YAML::Node& n, const std::string& where) {
    if (!n.IsScalar()) bad(where, kGridHelp);
    const std::string s(trim(n.Scalar()));
    CellGrid g;
    if (!s.empty() && (s[0] == 'z' || s[0] == 'Z')) {
        const auto z = parse_int(s.substr(1));
        if (!z || *z < 0 || *z > kMaxGridZoom) bad(where, kGridHelp);
        g.zoom = static_cast<int>(*z);
        return g;
    }
    try {
        g.degrees = n.as<double>();
    } catch (const YAML::Exception&) {
        bad(where, kGridHelp);
    }
    if (!(g.degrees >= kMinDegrees && g.degrees <= kMaxDegrees)) bad(where, kGridHelp);
    return g;
}

bool known_class(const std::string& name) {
    if (name == "other") return true;
    for (int i = 0; i < core::kCostClasses; ++i)
        if (name == core::cost_class_name(static_cast<core::CostClass>(i))) return true;
    return false;
}

}  // namespace

CellPolicy parse_cell_policy(const YAML::Node& n, const std::string& where) {
    if (!n.IsMap()) bad(where, "must be a mapping with grid, rate and burst");
    for (const auto& kv : n) {
        const std::string k = kv.first.as<std::string>();
        if (k != "grid" && k != "rate" && k != "burst" && k != "classes" && k != "keyed_clients")
            bad(where, "unknown key '" + k + "' (grid, rate, burst, classes, keyed_clients)");
    }
    if (!n["grid"] || !n["rate"] || !n["burst"]) bad(where, "needs grid, rate and burst");
    CellPolicy p;
    p.grid = parse_grid(n["grid"], where + ".grid");
    try {
        p.budget.rate = n["rate"].as<double>();
        p.budget.capacity = n["burst"].as<double>();
    } catch (const YAML::Exception&) {
        bad(where, "rate and burst must be numbers (cost units per second, cost units)");
    }
    if (const YAML::Node cl = n["classes"]) {
        if (!cl.IsSequence()) bad(where + ".classes", "must be a list of cost classes");
        p.classes.clear();
        for (const auto& e : cl) p.classes.push_back(e.as<std::string>());
    }
    if (const YAML::Node k = n["keyed_clients"]) {
        try {
            p.keyed_clients = k.as<bool>();
        } catch (const YAML::Exception&) {
            bad(where + ".keyed_clients", "must be true or false");
        }
    }
    return p;
}

std::string cells_problem(const Config& c) {
    for (const Tier& t : c.tiers) {
        if (!t.cells) continue;
        const std::string where = "tiers[" + t.name + "].cells";
        if (const char* p = core::budget_problem(t.cells->budget)) return where + ": " + p;
        if (t.cells->classes.empty()) return where + ".classes: list at least one cost class";
        for (const std::string& k : t.cells->classes)
            if (!known_class(k))
                return where + ".classes: unknown cost class '" + k + "' (" + core::cost_class_list() + ", other)";
    }
    return {};
}

}  // namespace ot::gate
