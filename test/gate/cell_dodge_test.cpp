// How a scraper would try to get around the area budget, each tried: boxes
// straddling cell edges, giant boxes whose centre creeps, the antimeridian
// and the poles in both CRSs; and the budget's config and refusal.
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <set>
#include <stdexcept>
#include <string>

#include "gate/cell_request.hpp"
#include "gate/config.hpp"

using namespace ot::gate;

namespace {
const CellGrid kDeg{0.1, -1};
const CellGrid kZ12{0.1, 12};
constexpr double kMerc = 20037508.342789244;

std::string cell(const std::string& target, const CellGrid& g = kDeg) {
    return request_cell(parse_request(HttpIn{"GET", target, "", "", ""}), g);
}

Config load(const std::string& yaml) {
    char path[] = "/tmp/gate_cells_testXXXXXX";
    const int fd = mkstemp(path);
    if (fd < 0) throw std::runtime_error("mkstemp");
    std::ofstream(path) << yaml;
    try {
        Config c = load_config_file(path, Config{});
        std::remove(path);
        return c;
    } catch (...) {
        std::remove(path);
        throw;
    }
}
std::string load_error(const std::string& yaml) {
    try {
        load(yaml);
    } catch (const std::exception& e) {
        return e.what();
    }
    return "";
}
}  // namespace

TEST(CellDodge, TheDocsWorkedExample) {
    EXPECT_EQ("d1886/1401", cell("/tiles/osm/14/8587/5548.png"));
    EXPECT_EQ("d1886/1401", cell("/?SERVICE=WMS&VERSION=1.3.0&REQUEST=GetMap&LAYERS=a&STYLES=&CRS=EPSG:4326"
                                 "&BBOX=50.105,8.675,50.115,8.685&WIDTH=256&HEIGHT=256&FORMAT=image/png"));
    EXPECT_EQ("d1886/1401", cell("/?SERVICE=WMS&VERSION=1.1.1&REQUEST=GetMap&LAYERS=a&STYLES=&SRS=EPSG:3857"
                                 "&BBOX=965931,6464450,967044,6466180&WIDTH=256&HEIGHT=256&FORMAT=image/png"));
}

TEST(CellDodge, BoxesStraddlingACornerGetAtMostItsFourCells) {
    // Cell-sized boxes jittered around the corner at 8.7 E 50.2 N.
    std::set<std::string> seen;
    for (int i = -5; i <= 5; ++i)
        for (int j = -5; j <= 5; ++j) {
            const double cx = 8.7 + i * 0.003, cy = 50.2 + j * 0.003;
            seen.insert(*cell_of_box(cx - 0.05, cy - 0.05, cx + 0.05, cy + 0.05, false, kDeg));
        }
    EXPECT_LE(seen.size(), 4u);
}

TEST(CellDodge, GiantBoxesWhoseCentreCreepsStayInOneCoarseCell) {
    for (const CellGrid& g : {kDeg, kZ12}) {
        std::set<std::string> seen;
        for (int i = 0; i < 50; ++i) {
            const double x = 2.0 + i * 0.02;  // 5° boxes moving 0.02° a step
            seen.insert(*cell_of_box(x, 45.0, x + 5.0, 50.0, false, g));
        }
        EXPECT_LE(seen.size(), 2u) << grid_name(g);
    }
    // The whole world, or more, is one cell, however it is written.
    EXPECT_EQ(*cell_of_box(-180, -90, 180, 90, false, kDeg), *cell_of_box(-1e6, -1e6, 1e6, 1e6, false, kDeg));
    EXPECT_TRUE(cell_of_box(-1e308, -1e308, 1e308, 1e308, false, kDeg));
}

TEST(CellDodge, AntimeridianInEveryAxisOrderAndCrs) {
    const std::string want = *cell_of_point(180.0, 10.05, kDeg);
    const std::string base = "/?SERVICE=WMS&REQUEST=GetMap&LAYERS=a&STYLES=&WIDTH=256&HEIGHT=256&FORMAT=image/png";
    EXPECT_EQ(want, cell(base + "&VERSION=1.3.0&CRS=EPSG:4326&BBOX=10.01,179.96,10.09,-179.96"));
    EXPECT_EQ(want, cell(base + "&VERSION=1.3.0&CRS=CRS:84&BBOX=179.96,10.01,-179.96,10.09"));
    EXPECT_EQ(want, cell(base + "&VERSION=1.1.1&SRS=EPSG:4326&BBOX=179.96,10.01,180.04,10.09"));
    const double e = 0.04 * kMerc / 180.0;
    char m[160];
    std::snprintf(m, sizeof m, "&VERSION=1.3.0&CRS=EPSG:3857&BBOX=%.3f,1118000,%.3f,1127000", kMerc - e, -kMerc + e);
    EXPECT_EQ(want, cell(base + m));
    // and the tiles on either side of it are neighbours, not the other side of the world
    const std::string west = cell("/tiles/a/14/0/7700.png"), east = cell("/tiles/a/14/16383/7700.png");
    EXPECT_NE(west, east);
    EXPECT_EQ(west.substr(0, 3), "d0/");
    EXPECT_EQ(east.substr(0, 6), "d3599/");
}

TEST(CellDodge, PolesInDegreesMetresAndTiles) {
    const std::string base = "/?SERVICE=WMS&REQUEST=GetMap&LAYERS=a&STYLES=&WIDTH=256&HEIGHT=256&FORMAT=image/png";
    const std::string north = cell(base + "&VERSION=1.3.0&CRS=EPSG:4326&BBOX=89.95,10.01,90,10.09");
    EXPECT_EQ(north, *cell_of_point(10.05, 90, kDeg));
    // Beyond the pole is the edge row, never a cell of its own per latitude.
    EXPECT_EQ(*cell_of_point(10.05, 95, kDeg), *cell_of_point(10.05, 1e9, kDeg));
    // Web Mercator metres beyond its square clamp the same way.
    EXPECT_EQ(*cell_of_box(1e6, 3e7, 1.001e6, 3.0001e7, true, kZ12), *cell_of_box(1e6, 9e7, 1.001e6, 9.0001e7, true, kZ12));
    EXPECT_EQ(cell("/tiles/a/14/8000/0.png", kZ12), "z12/2000/0");
    EXPECT_EQ(cell("/tiles/a/14/8000/16383.png", kZ12), "z12/2000/4095");
}

TEST(CellDodge, ConfigPerTierWithClearErrors) {
    const Config c = load("tiers:\n  - {name: public, rate: 10, burst: 100, cells: {grid: 0.25, rate: 0.5, burst: 60}}\n"
                          "  - {name: keyed, rate: 10, burst: 100, cells: {grid: z12, rate: 1, burst: 9, classes: [tile], keyed_clients: true}}\n"
                          "  - {name: plain, rate: 10, burst: 100}\n");
    ASSERT_TRUE(c.tier("public").cells);
    EXPECT_EQ(grid_name(c.tier("public").cells->grid), "0.25");
    EXPECT_EQ(c.tier("public").cells->budget.capacity, 60);
    EXPECT_EQ(c.tier("public").cells->classes, (std::vector<std::string>{"map", "tile"}));
    EXPECT_FALSE(c.tier("public").cells->keyed_clients);
    EXPECT_EQ(c.tier("keyed").cells->grid.zoom, 12);
    EXPECT_TRUE(c.tier("keyed").cells->keyed_clients);
    EXPECT_FALSE(c.tier("plain").cells);
    EXPECT_FALSE(Config{}.tiers.front().cells);  // off unless configured
    const std::string t = "tiers:\n  - {name: public, rate: 10, burst: 100, cells: ";
    EXPECT_NE(load_error(t + "{grid: -1, rate: 1, burst: 5}}\n").find("tiers[public].cells.grid: must be"), std::string::npos);
    EXPECT_NE(load_error(t + "{grid: z25, rate: 1, burst: 5}}\n").find("z0 to z24"), std::string::npos);
    EXPECT_NE(load_error(t + "{grid: 0.1, rate: x, burst: 5}}\n").find("rate and burst must be numbers"), std::string::npos);
    EXPECT_NE(load_error(t + "{grid: 0.1, rate: 1, burst: 0}}\n").find("tiers[public].cells: "), std::string::npos);
    EXPECT_NE(load_error(t + "{grid: 0.1, rate: 1, burst: 5, classes: []}}\n").find("at least one cost class"), std::string::npos);
    EXPECT_NE(load_error(t + "{grid: 0.1, rate: 1, burst: 5, keyed_clients: maybe}}\n").find("true or false"), std::string::npos);
    // Shared through the Redis store like the address buckets (test/gate/cells_redis.t.sh).
    EXPECT_EQ(load_error("identity: {hash_secret: abcdefgh}\nbuckets: {store: redis, url: \"redis://127.0.0.1:1/0\"}\n" + t +
                         "{grid: 0.1, rate: 1, burst: 5}}\n"),
              "");
}

TEST(CellDodge, TheRefusalNamesTheCellBudgetAndWhenToRetry) {
    Config c;
    c.tiers.front().cells = CellPolicy{kDeg, {6, 2}, {"map", "tile"}, false};
    const Tier& tier = c.tiers.front();
    const HttpIn in{"GET", "/tiles/osm/14/8587/5548.png", "", "", ""};
    const Assessment a = assess(in, c);
    const ot::core::SpendResult ok{ot::core::SpendOutcome::Allowed, 0, 900, 0, 1};
    const CellSpend refused{"d1886/1401", {ot::core::SpendOutcome::Refused, 0, 0.4, 2.3, 3}};
    const Decision d = decide(in, a, tier, ok, c, &refused);
    EXPECT_FALSE(d.forward);
    EXPECT_EQ(d.response.status, 429);
    EXPECT_EQ(d.verdict, "cell_throttled");
    EXPECT_EQ(d.charged, 0);
    EXPECT_NE(d.response.body.find("Area rate limit of the 'public' tier reached for map cell d1886/1401 (grid 0.1)"),
              std::string::npos);
    HeaderList want{{"Retry-After", "3"}, {"RateLimit-Policy", "\"public.cell\";q=6;w=3"}, {"X-RateLimit-Remaining", "0"}};
    for (const auto& h : want) {
        bool found = false;
        for (const auto& g : d.response.headers) found |= g == h;
        EXPECT_TRUE(found) << h.first << ": " << h.second;
    }
    // Admitted by both: forwarded and charged once.
    const CellSpend fine{"d1886/1401", ok};
    const Decision p = decide(in, a, tier, ok, c, &fine);
    EXPECT_TRUE(p.forward);
    EXPECT_EQ(p.charged, a.price.cost);
    // A cost above the cell's whole burst: never fits there, no Retry-After.
    const CellSpend never{"d1886/1401", {ot::core::SpendOutcome::NeverFits, 0, 6, 0, 0}};
    const Decision n = decide(in, a, tier, ok, c, &never);
    EXPECT_EQ(n.verdict, "cell_never_fits");
    for (const auto& h : n.response.headers) EXPECT_NE(h.first, "Retry-After");
    // Shadow mode forwards, and charges nothing (the address was given its charge back).
    c.shadow = true;
    const Decision s = decide(in, a, c.tiers.front(), ok, c, &refused);
    EXPECT_TRUE(s.forward);
    EXPECT_EQ(s.verdict, "shadow_cell_throttled");
    EXPECT_EQ(s.charged, 0);
}
