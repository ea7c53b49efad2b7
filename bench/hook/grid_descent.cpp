// A density grid's box query, from the root and from the direct index of its
// top levels (View::jump), warm (query after query) and cold (a sweep of more
// memory than the caches hold between queries, as a statement's own work
// leaves a grid in shared memory). Same run, same boxes; prints ns a query and
// the ratio, and checks both give the same rows.
//
//   make bench/hook/grid_descent && bench/hook/grid_descent [COLD_QUERIES]
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

#include "core/density_grid.hpp"
#include "core/density_grid_format.hpp"

using namespace ot::core;

namespace {

struct Box {
    double x0, y0, x1, y1;
};

// The bench/hook data: 200 000 points at random over 5-15 E, 45-55 N (EPSG:3857), one heap block per 80.
std::vector<unsigned char> uniform_grid(DensityExtent* e) {
    *e = {556597, 5621521, 1669792, 7361866};
    std::mt19937_64 r(42);
    std::uniform_real_distribution<double> ux(e->xmin, e->xmax), uy(e->ymin, e->ymax);
    const std::size_t n = 200000;
    std::vector<double> x(n), y(n);
    std::vector<std::uint32_t> b(n);
    for (std::size_t i = 0; i < n; i++) x[i] = ux(r), y[i] = uy(r), b[i] = static_cast<std::uint32_t>(i / 80);
    return build_density_grid(x.data(), y.data(), n, *e, 20, 32, 0, 0, 0, 0, b.data(), 1u << 18);
}

// Cities of varied sizes and densities (60, σ 0.5-15 km) and a sparse background: 1 000 000 points.
std::vector<unsigned char> city_grid(DensityExtent* e, std::vector<std::pair<double, double>>* centres) {
    *e = {556597, 5621521, 1669792, 7361866};
    std::mt19937_64 r(7);
    std::uniform_real_distribution<double> ux(e->xmin, e->xmax), uy(e->ymin, e->ymax), u(0, 1);
    const std::size_t n = 1000000;
    std::vector<double> x(n), y(n);
    std::vector<std::uint32_t> b(n);
    std::vector<double> sigma;
    for (int c = 0; c < 60; c++) centres->push_back({ux(r), uy(r)}), sigma.push_back(500 * std::pow(30.0, u(r)));
    for (std::size_t i = 0; i < n; i++) {
        if (u(r) < 0.2) {
            x[i] = ux(r), y[i] = uy(r);
        } else {
            const int c = static_cast<int>(std::pow(u(r), 2) * 60);
            std::normal_distribution<double> g(0, sigma[c]);
            x[i] = std::clamp((*centres)[c].first + g(r), e->xmin, e->xmax);
            y[i] = std::clamp((*centres)[c].second + g(r), e->ymin, e->ymax);
        }
        b[i] = static_cast<std::uint32_t>(i / 80);
    }
    return build_density_grid(x.data(), y.data(), n, *e, 20, 32, 0, 0, 0, 0, b.data(), 1u << 18);
}

// postgis.pgbench's two statements: a radius of 100-5 000 m, a tile at zoom 12-14 with a 1/64 margin.
std::vector<Box> boxes(const DensityExtent& e, const std::vector<std::pair<double, double>>& near, std::size_t n) {
    std::mt19937_64 r(99);
    std::uniform_real_distribution<double> ux(e.xmin, e.xmax), uy(e.ymin, e.ymax), u(0, 1);
    std::vector<Box> out;
    for (std::size_t i = 0; i < n; i++) {
        double cx = ux(r), cy = uy(r);
        if (!near.empty() && i % 2 == 0) {
            const auto& c = near[static_cast<std::size_t>(u(r) * near.size()) % near.size()];
            cx = c.first + (u(r) - 0.5) * 20000, cy = c.second + (u(r) - 0.5) * 20000;
        }
        if (i % 2 == 0) {
            const double rad = 100 + u(r) * 4900;
            out.push_back({cx - rad, cy - rad, cx + rad, cy + rad});
        } else {
            const double t = 40075016.68 / std::ldexp(1.0, 12 + static_cast<int>(u(r) * 3)), m = t / 64;
            const double tx = std::floor((cx + 20037508.34) / t) * t - 20037508.34;
            const double ty = std::floor((cy + 20037508.34) / t) * t - 20037508.34;
            out.push_back({tx - m, ty - m, tx + t + m, ty + t + m});
        }
    }
    return out;
}

std::vector<unsigned char> sweep_buf(64u << 20);
volatile unsigned sink;
void evict() {  // read a line of every 64 bytes of 64 MiB: the caches and the TLB hold none of the grid after
    unsigned s = 0;
    for (std::size_t i = 0; i < sweep_buf.size(); i += 64) s += sweep_buf[i];
    sink = s;
}

double ns_per_query(const grid::View& v, const std::vector<Box>& q, bool cold, double* sum) {
    double total = 0, rows = 0;
    for (const Box& b : q) {
        if (cold) evict();
        double pages;
        const auto t0 = std::chrono::steady_clock::now();
        rows += density_rows_pages(v, b.x0, b.y0, b.x1, b.y1, &pages);
        total += std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - t0).count();
    }
    *sum = rows;
    return total / q.size();
}

int run(const char* name, const std::vector<unsigned char>& g, const std::vector<Box>& q, std::size_t cold_n) {
    grid::View root, jump;
    if (!grid::open(g.data(), g.size(), &root) || !grid::open(g.data(), g.size(), &jump)) return 1;
    std::vector<std::uint32_t> table(density_jump_entries(jump));
    const auto f0 = std::chrono::steady_clock::now();
    if (!density_jump_fill(jump, table.data())) return 1;
    const double fill_us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - f0).count();
    jump.jump = table.data();
    jump.jump_levels = std::min(jump.h.levels, grid::kJumpMaxLevels);
    // The same rows and pages both ways, box by box.
    double worst = 0;
    for (const Box& b : q) {
        double p1, p2;
        const double a = density_rows_pages(root, b.x0, b.y0, b.x1, b.y1, &p1);
        const double c = density_rows_pages(jump, b.x0, b.y0, b.x1, b.y1, &p2);
        worst = std::max({worst, std::fabs(a - c) / std::max(1.0, std::fabs(a)), std::fabs(p1 - p2) / std::max(1.0, std::fabs(p1))});
    }
    std::size_t levels = 0;
    for (std::uint32_t l = 0; l <= root.h.levels; l++) levels += root.h.ncells[l] > 0;
    std::printf("%s: %zu bytes, %zu levels stored; jump table %zu entries, filled in %.0f us; max relative "
                "difference %.2g\n", name, g.size(), levels, table.size(), fill_us, worst);
    const std::vector<Box> cq(q.begin(), q.begin() + std::min(cold_n, q.size()));
    double s1, s2;
    for (int round = 1; round <= 3; round++) {
        const double wr = ns_per_query(root, q, false, &s1), wj = ns_per_query(jump, q, false, &s2);
        const double cr = ns_per_query(root, cq, true, &s1), cj = ns_per_query(jump, cq, true, &s2);
        std::printf("  round %d: warm root %.0f ns, jump %.0f ns (%.2f) | cold root %.0f ns, jump %.0f ns (%.2f)\n", round,
                    wr, wj, wj / wr, cr, cj, cj / cr);
    }
    // What a cold call costs before any cell is read (its code, the View's header, the clock).
    std::vector<Box> outside(cq.size(), Box{0, 0, 1, 1});
    std::printf("  cold, a box outside the extent (no cell read): %.0f ns\n", ns_per_query(jump, outside, true, &s1));
    return worst > 1e-9;
}

}  // namespace

int main(int argc, char** argv) {
    const std::size_t cold_n = argc > 1 ? std::strtoul(argv[1], nullptr, 10) : 3000;
    for (std::size_t i = 0; i < sweep_buf.size(); i++) sweep_buf[i] = static_cast<unsigned char>(i);
    DensityExtent e;
    const std::vector<unsigned char> u = uniform_grid(&e);
    int rc = run("uniform 200 000 (bench/hook)", u, boxes(e, {}, 20000), cold_n);
    std::vector<std::pair<double, double>> centres;
    const std::vector<unsigned char> c = city_grid(&e, &centres);
    rc |= run("60 cities + background, 1 000 000", c, boxes(e, centres, 20000), cold_n);
    return rc;
}
