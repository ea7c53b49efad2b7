// Query keeps its decoded parameters as views into one buffer of its own
// (request.hpp): these tests check that the views outlive the text they were
// read from, follow the buffer through copies, moves and growth, and that a
// Query (or a request) assigned the next request on a kept-alive connection
// reads only the new one.
#include <gtest/gtest.h>

#include <string>

#include "gate/request.hpp"
#include "gate/text.hpp"

using namespace ot::gate;

namespace {

std::string value_of(const Query& q, std::string_view key) {
    const Param* p = q.find(key);
    return p ? std::string(p->value) : std::string("<none>");
}

}  // namespace

TEST(QueryArena, ViewsOutliveTheirSource) {
    std::string why;
    std::optional<Query> q;
    {
        std::string target = "layers=roads%2Crivers&Crs=EPSG%3A4326&width=256&plain=abc";
        q = parse_query(target, &why);
        target.assign(target.size(), 'X');  // the source is overwritten, then freed
    }
    ASSERT_TRUE(q) << why;
    EXPECT_EQ(value_of(*q, "LAYERS"), "roads,rivers");
    EXPECT_EQ(value_of(*q, "CRS"), "EPSG:4326");
    EXPECT_EQ(value_of(*q, "WIDTH"), "256");
    EXPECT_EQ(value_of(*q, "PLAIN"), "abc");
    EXPECT_EQ(q->find("CRS")->name, "Crs");
    EXPECT_EQ(q->raw, "layers=roads%2Crivers&Crs=EPSG%3A4326&width=256&plain=abc");
}

// A kept-alive connection assigns each request over the previous one
// (ex_ = Exchange{}, then ex_.assessment = assess(...)): nothing of the
// first may show through, neither in a Query nor in a whole request.
TEST(QueryArena, AssignedNextRequestReadsOnlyItsOwn) {
    std::string why;
    Query q = *parse_query("service=WMS&request=GetMap&layers=first&width=100&bbox=1%2C2%2C3%2C4", &why);
    ASSERT_EQ(value_of(q, "LAYERS"), "first");
    q = *parse_query("layers=second&height=7", &why);  // shorter: reuses nothing by accident
    EXPECT_EQ(value_of(q, "LAYERS"), "second");
    EXPECT_EQ(value_of(q, "HEIGHT"), "7");
    EXPECT_EQ(q.find("WIDTH"), nullptr);
    EXPECT_EQ(q.find("BBOX"), nullptr);
    EXPECT_EQ(q.params.size(), 2u);

    OgcRequest r = parse_request({"GET", "/wms?SERVICE=WMS&REQUEST=GetMap&VERSION=1.3.0&LAYERS=a%20b&CRS=EPSG:4326"
                                          "&BBOX=0,0,1,1&WIDTH=256&HEIGHT=256&FORMAT=image/png",
                                  "", ""});
    ASSERT_TRUE(r.problem.empty()) << r.problem;
    EXPECT_EQ(value_of(r.query, "LAYERS"), "a b");
    r = parse_request({"GET", "/wms?service=WMS&request=GetMap&version=1.3.0&layers=c&crs=EPSG:3857&bbox=5,5,6,6"
                              "&width=64&height=32&format=image/jpeg",
                       "", ""});
    ASSERT_TRUE(r.problem.empty()) << r.problem;
    EXPECT_EQ(value_of(r.query, "LAYERS"), "c");
    EXPECT_EQ(value_of(r.query, "FORMAT"), "image/jpeg");
    EXPECT_EQ(*r.width, "64");
    EXPECT_EQ(*r.height, "32");
    EXPECT_EQ(r.bbox->crs, "EPSG:3857");
    // Canonical spelling is the upper-cased key, from this request's buffer.
    EXPECT_EQ(r.query.find("LAYERS")->name, "LAYERS");
}

// A short query lives in the string's in-place buffer, which moves with the
// object: the views must move with it.
TEST(QueryArena, CopiesAndMovesRepointViews) {
    std::string why;
    Query a = *parse_query("a=b", &why);
    Query moved = std::move(a);
    EXPECT_EQ(value_of(moved, "A"), "b");
    Query copy;
    {
        Query tmp = *parse_query("x=%41&y=long+value+past+the+in+place+buffer", &why);
        copy = tmp;
        Query small = moved;  // copy of an in-place buffer
        EXPECT_EQ(value_of(small, "A"), "b");
        EXPECT_NE(small.find("A")->value.data(), moved.find("A")->value.data());
    }
    EXPECT_EQ(value_of(copy, "X"), "A");
    EXPECT_EQ(value_of(copy, "Y"), "long value past the in place buffer");
    EXPECT_EQ(copy.raw, "x=%41&y=long+value+past+the+in+place+buffer");
    Query assigned;
    assigned = std::move(copy);
    EXPECT_EQ(value_of(assigned, "Y"), "long value past the in place buffer");
    EXPECT_TRUE(copy.params.empty());
}

// Growing the buffer past what was reserved re-points what is in it,
// including a view handed back to store()/upper() from the buffer itself.
TEST(QueryArena, GrowthRepointsViews) {
    Query q;
    const std::string_view k = q.store("key");
    q.params.push_back({q.upper(k), q.store("value"), k});
    for (int i = 0; i < 200; ++i) (void)q.store("padding that forces the buffer to move ");
    const std::string_view again = q.upper(q.params[0].name);  // a view into the buffer, across growth
    EXPECT_EQ(again, "KEY");
    EXPECT_EQ(q.params[0].key, "KEY");
    EXPECT_EQ(q.params[0].value, "value");
    EXPECT_EQ(q.params[0].name, "key");
    Query c = q;
    EXPECT_EQ(c.params[0].value, "value");
}

// The buffer's decoding reads exactly as percent_decode does, on every short
// string over the bytes that matter (escapes, '+', hex digits and not).
TEST(QueryArena, DecodeAgreesWithPercentDecode) {
    const std::string alphabet = "%+4aFg0";
    std::string s;
    std::size_t checked = 0;
    for (int len = 0; len <= 5; ++len) {
        std::size_t combos = 1;
        for (int i = 0; i < len; ++i) combos *= alphabet.size();
        for (std::size_t n = 0; n < combos; ++n) {
            s.clear();
            for (std::size_t m = n, i = 0; i < static_cast<std::size_t>(len); ++i, m /= alphabet.size())
                s += alphabet[m % alphabet.size()];
            for (bool plus : {false, true}) {
                Query q;
                const auto mine = q.decode(s, plus);
                const auto ref = percent_decode(s, plus);
                ASSERT_EQ(mine.has_value(), ref.has_value()) << s;
                if (mine) {
                    ASSERT_EQ(std::string(*mine), *ref) << s;
                }
                ++checked;
            }
        }
    }
    EXPECT_GT(checked, 30000u);
}

TEST(QueryArena, StrictnessUnchanged) {
    std::string why;
    EXPECT_FALSE(parse_query("a=%zz", &why));
    EXPECT_FALSE(parse_query("a%3Db=1", &why));  // a name hiding '='
    EXPECT_FALSE(parse_query("a=1&A=2", &why));  // repeated with another value
    EXPECT_TRUE(parse_query("a=1&A=1", &why));   // said twice alike
    EXPECT_FALSE(parse_query("a=x%00", &why));   // NUL
    auto sub = parse_query("subset=x(1,2)&SUBSET=y(3,4)", &why);
    ASSERT_TRUE(sub);
    EXPECT_EQ(sub->params.size(), 2u);
    std::string many;
    for (int i = 0; i < 513; ++i) many += "p" + std::to_string(i) + "=1&";
    many.pop_back();
    EXPECT_FALSE(parse_query(many, &why));
    // Upper-cased keys point into the query's buffer; already upper-case names are the name itself.
    auto q = parse_query("Layers=a&WIDTH=1", &why);
    ASSERT_TRUE(q);
    EXPECT_EQ(q->params[1].key.data(), q->params[1].name.data());
    EXPECT_NE(q->params[0].key.data(), q->params[0].name.data());
}
