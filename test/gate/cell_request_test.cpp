// Cells of whole requests (cell_request.hpp): every spelling of one place, in
// every protocol the gate reads, lands in one cell; what cannot be placed
// gets a coarse cell or the catch-all, never a free pass.
#include <gtest/gtest.h>

#include <cmath>
#include <set>
#include <string>

#include "gate/cell_request.hpp"

using namespace ot::gate;

namespace {
const CellGrid kDeg{0.1, -1};
const CellGrid kZ12{0.1, 12};
constexpr double kPi = 3.14159265358979323846;

std::string cell(const std::string& target, const CellGrid& g = kDeg) {
    return request_cell(parse_request(HttpIn{"GET", target, "", "", ""}), g);
}
std::string num(double v) {
    char b[64];
    std::snprintf(b, sizeof b, "%.6f", v);
    return b;
}
double merc_x(double lon) { return lon * 20037508.342789244 / 180.0; }
double merc_y(double lat) { return 6378137.0 * std::log(std::tan(kPi / 4 + lat * kPi / 360.0)); }
std::int64_t tile_x(double lon, int z) { return static_cast<std::int64_t>((lon + 180.0) / 360.0 * std::ldexp(1, z)); }
std::int64_t tile_y(double lat, int z) {
    const double r = lat * kPi / 180.0;
    return static_cast<std::int64_t>((1.0 - std::log(std::tan(r) + 1.0 / std::cos(r)) / kPi) / 2.0 * std::ldexp(1, z));
}

// A small area around (8.65 E, 50.15 N), well inside one 0.1° cell and one z12 tile.
const double kLon = 8.65, kLat = 50.15, kH = 0.004;
std::string wms130_4326() {
    return "/?SERVICE=WMS&VERSION=1.3.0&REQUEST=GetMap&LAYERS=a&STYLES=&CRS=EPSG:4326&WIDTH=256&HEIGHT=256&FORMAT=image/png&BBOX=" +
           num(kLat - kH) + "," + num(kLon - kH) + "," + num(kLat + kH) + "," + num(kLon + kH);
}
}  // namespace

TEST(CellRequest, EveryAxisOrderAndCrsOfOneAreaIsOneCell) {
    const std::string want = cell(wms130_4326());
    ASSERT_EQ(want, *cell_of_point(kLon, kLat, kDeg));
    const std::string lonlat = num(kLon - kH) + "," + num(kLat - kH) + "," + num(kLon + kH) + "," + num(kLat + kH);
    const std::string base = "/?SERVICE=WMS&REQUEST=GetMap&LAYERS=a&STYLES=&WIDTH=256&HEIGHT=256&FORMAT=image/png";
    EXPECT_EQ(want, cell(base + "&VERSION=1.3.0&CRS=CRS:84&BBOX=" + lonlat));
    EXPECT_EQ(want, cell(base + "&VERSION=1.1.1&SRS=EPSG:4326&BBOX=" + lonlat));  // 1.1.1 is lon/lat
    const std::string m = num(merc_x(kLon - kH)) + "," + num(merc_y(kLat - kH)) + "," + num(merc_x(kLon + kH)) + "," +
                          num(merc_y(kLat + kH));
    EXPECT_EQ(want, cell(base + "&VERSION=1.3.0&CRS=EPSG:3857&BBOX=" + m));
    EXPECT_EQ(want, cell(base + "&VERSION=1.1.1&SRS=EPSG:900913&BBOX=" + m));
    // WFS 2.0 with an EPSG URN is latitude first; OGC API items are CRS84
    // unless bbox-crs says EPSG:4326 (then latitude first too).
    EXPECT_EQ(want, cell("/?SERVICE=WFS&VERSION=2.0.0&REQUEST=GetFeature&TYPENAMES=a&BBOX=" + num(kLat - kH) + "," +
                         num(kLon - kH) + "," + num(kLat + kH) + "," + num(kLon + kH) + ",urn:ogc:def:crs:EPSG::4326"));
    EXPECT_EQ(want, cell("/collections/a/items?bbox=" + lonlat));
    EXPECT_EQ(want, cell("/collections/a/items?bbox=" + num(kLat - kH) + "," + num(kLon - kH) + "," + num(kLat + kH) +
                         "," + num(kLon + kH) + "&bbox-crs=http://www.opengis.net/def/crs/EPSG/0/4326"));
    // Read the wrong way round, the 1.3.0 box would sit at 50 E 8 N.
    EXPECT_NE(want, *cell_of_point(kLat, kLon, kDeg));
}

TEST(CellRequest, TilesOfEveryProtocolShareTheBoxesCell) {
    const int z = 14;
    const auto x = tile_x(kLon, z), y = tile_y(kLat, z);
    const std::string X = std::to_string(x), Y = std::to_string(y), Z = std::to_string(z);
    for (const CellGrid& g : {kDeg, kZ12}) {
        const std::string want = cell(wms130_4326(), g);
        EXPECT_EQ(want, cell("/tiles/osm/" + Z + "/" + X + "/" + Y + ".png", g));
        EXPECT_EQ(want, cell("/wmts?SERVICE=WMTS&REQUEST=GetTile&VERSION=1.0.0&LAYER=a&STYLE=default&FORMAT=image/png"
                             "&TILEMATRIXSET=GoogleMapsCompatible&TILEMATRIX=GoogleMapsCompatible:" + Z +
                                 "&TILEROW=" + Y + "&TILECOL=" + X, g));
        EXPECT_EQ(want, cell("/wmts?SERVICE=WMTS&REQUEST=GetTile&VERSION=1.0.0&LAYER=a&STYLE=default&FORMAT=image/png"
                             "&TILEMATRIXSET=EPSG:3857&TILEMATRIX=EPSG:3857:" + Z + "&TILEROW=" + Y + "&TILECOL=" + X, g));
        EXPECT_EQ(want, cell("/wmts/a/default/WebMercatorQuad/" + Z + "/" + Y + "/" + X + ".png", g));
        EXPECT_EQ(want, cell("/collections/a/map/tiles/WebMercatorQuad/" + Z + "/" + Y + "/" + X, g));
        // TMS counts rows from the bottom.
        const std::string tms_y = std::to_string((std::int64_t{1} << z) - 1 - y);
        EXPECT_EQ(want, cell("/tms/1.0.0/a/" + Z + "/" + X + "/" + tms_y + ".png", g));
        // A geographic pyramid (two 180° tiles at level 0), its tile over the same place.
        const double size = 180.0 / std::ldexp(1, z);
        const auto gx = static_cast<std::int64_t>((kLon + 180.0) / size), gy = static_cast<std::int64_t>((90.0 - kLat) / size);
        EXPECT_EQ(want, cell("/wmts?SERVICE=WMTS&REQUEST=GetTile&VERSION=1.0.0&LAYER=a&STYLE=&FORMAT=image/png"
                             "&TILEMATRIXSET=WorldCRS84Quad&TILEMATRIX=" + Z + "&TILEROW=" + std::to_string(gy) +
                                 "&TILECOL=" + std::to_string(gx), g));
    }
}

TEST(CellRequest, TilesOutsideTheirMatrixShareTheCatchAllCell) {
    EXPECT_EQ("x", cell("/tiles/a/3/8/0.png"));
    EXPECT_EQ("x", cell("/tiles/a/3/0/8.png"));
    EXPECT_EQ("x", cell("/tiles/a/3/-1/0.png"));
    EXPECT_EQ("x", cell("/tiles/a/40/0/0.png"));
    EXPECT_EQ("x", cell("/tms/1.0.0/a/3/0/8.png"));
    EXPECT_EQ("x", cell("/wmts?SERVICE=WMTS&REQUEST=GetTile&VERSION=1.0.0&LAYER=a&STYLE=&FORMAT=image/png"
                        "&TILEMATRIXSET=GoogleMapsCompatible&TILEMATRIX=3&TILECOL=0"));  // no TILEROW
    EXPECT_EQ("x", cell("/wmts?SERVICE=WMTS&REQUEST=GetTile&VERSION=1.0.0&LAYER=a&STYLE=&FORMAT=image/png"
                        "&TILEMATRIXSET=GoogleMapsCompatible&TILEMATRIX=3&TILEROW=99999999999999999999&TILECOL=0"));
    // A map without a box has no place either.
    EXPECT_EQ("x", cell("/?SERVICE=WMS&VERSION=1.3.0&REQUEST=GetMap&LAYERS=a&STYLES=&CRS=EPSG:4326&WIDTH=2&HEIGHT=2"));
}

TEST(CellRequest, UnknownTileMatrixSetsGetTheAncestorTileWhateverTheirName) {
    const std::string q = "/wmts?SERVICE=WMTS&REQUEST=GetTile&VERSION=1.0.0&LAYER=a&STYLE=&FORMAT=image/png&TILEMATRIX=16";
    const std::string a = cell(q + "&TILEMATRIXSET=UTM32Quad&TILEROW=40000&TILECOL=30000", kZ12);
    EXPECT_EQ("q12/1875/2500", a);
    // Another name the server may not even offer: the same key, so renaming the set mints nothing.
    EXPECT_EQ(a, cell(q + "&TILEMATRIXSET=made-up-7&TILEROW=40000&TILECOL=30000", kZ12));
    // Neighbouring tiles of one ancestor share it; out of any pyramid: the catch-all.
    EXPECT_EQ(a, cell(q + "&TILEMATRIXSET=UTM32Quad&TILEROW=40015&TILECOL=30015", kZ12));
    EXPECT_EQ("x", cell(q + "&TILEMATRIXSET=UTM32Quad&TILEROW=0&TILECOL=200000", kZ12));
}

TEST(CellRequest, OtherCrsAreCoarseCellsNamedByTheirCode) {
    const std::string base = "/?SERVICE=WMS&VERSION=1.3.0&REQUEST=GetMap&LAYERS=a&STYLES=&WIDTH=256&HEIGHT=256&FORMAT=image/png";
    const std::string utm = cell(base + "&CRS=EPSG:25832&BBOX=476000,5555000,477000,5556000");
    EXPECT_EQ("e25832+0:47/555", utm);
    EXPECT_EQ(utm, cell(base + "&CRS=urn:ogc:def:crs:EPSG::25832&BBOX=476000,5555000,477000,5556000"));
    EXPECT_EQ(utm, cell(base + "&CRS=http://www.opengis.net/def/crs/EPSG/0/25832&BBOX=478000,5557000,479000,5558000"));
    // A giant box in them: one coarser cell, not a fresh one per step.
    std::set<std::string> seen;
    for (int i = 0; i < 20; ++i) {
        const double x0 = 100000 + i * 5000.0;
        seen.insert(cell(base + "&CRS=EPSG:25832&BBOX=" + num(x0) + ",5000000," + num(x0 + 400000) + ",5400000"));
    }
    EXPECT_LE(seen.size(), 2u);
    // Nonsense numbers still get a cell (and no undefined behaviour).
    EXPECT_NE("x", cell(base + "&CRS=EPSG:25832&BBOX=-1e308,-1e308,1e308,1e308"));
    EXPECT_EQ("e0+0:0/0", cell(base + "&CRS=nonsense&BBOX=1,1,2,2"));
}

TEST(CellRequest, TheBudgetAppliesToAddressesOfListedClassesByDefault) {
    Tier t{"public", {100, 10}, {}, {}};
    t.cells = CellPolicy{};
    Assessment a;
    a.req = parse_request(HttpIn{"GET", wms130_4326(), "", "", ""});
    a.price.cost_class = "map";
    Identity ip{"ip:0123456789abcdef", "0123456789abcdef", "public", {}};
    Identity key{"key:0123456789abcdef", "0123456789abcdef", "public", {}};
    EXPECT_EQ(cell_for(a, ip, t), *cell_of_point(kLon, kLat, t.cells->grid));
    EXPECT_FALSE(cell_for(a, key, t));
    t.cells->keyed_clients = true;
    EXPECT_TRUE(cell_for(a, key, t));
    a.price.cost_class = "features";
    EXPECT_FALSE(cell_for(a, ip, t));
    t.cells.reset();
    a.price.cost_class = "map";
    EXPECT_FALSE(cell_for(a, ip, t));
}

TEST(CellRequest, ARefusedCellGivesTheAddressItsChargeBack) {
    Tier t{"public", {10, 1e-6}, {}, {}};
    t.cells = CellPolicy{kDeg, {3, 1e-6}, {"map"}, false};
    BucketTable addr(1000), cells(1000);
    const std::int64_t now = 1'000'000'000;
    int admitted = 0;
    for (int i = 0; i < 5; ++i) {
        ASSERT_EQ(addr.spend("ip:a", 1, t.budget, now).outcome, ot::core::SpendOutcome::Allowed);
        const CellSpend s = spend_cell(cells, addr, "ip:a", "d1/1", 1, t, now);
        admitted += s.spent.outcome == ot::core::SpendOutcome::Allowed;
        if (i >= 3) {
            EXPECT_GT(s.spent.retry_after_s, 0);
        }
    }
    EXPECT_EQ(admitted, 3);
    // Exactly the three admitted are charged to the address: nothing lost, nothing twice.
    EXPECT_NEAR(addr.snapshot(now, 10).at(0).tokens, 7.0, 1e-6);
    // Another cell of the same client has its own budget.
    ASSERT_EQ(addr.spend("ip:a", 1, t.budget, now).outcome, ot::core::SpendOutcome::Allowed);
    EXPECT_EQ(spend_cell(cells, addr, "ip:a", "d1/2", 1, t, now).spent.outcome, ot::core::SpendOutcome::Allowed);
    EXPECT_EQ(cells.size(), 2u);
}
