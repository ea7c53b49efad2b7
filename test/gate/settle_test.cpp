// The settlement rules of charge: measured (src/gate/settle.hpp) and the
// coalescer's count of who shared a flight.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>

#include "gate/coalescer.hpp"
#include "gate/config.hpp"
#include "gate/settle.hpp"

using namespace ot::gate;

namespace {
Timing sent(double wall, double blocked = 0) { return Timing{wall, blocked, true}; }
}  // namespace

TEST(Settle, MeasuredIsWallLessTimeBlockedOnTheClient) {
    EXPECT_DOUBLE_EQ(measured_ms(sent(800)), 800);
    EXPECT_DOUBLE_EQ(measured_ms(sent(800, 300)), 500);
    EXPECT_DOUBLE_EQ(measured_ms(Timing{}), 0);  // never sent
}

TEST(Settle, CompleteChargesTheUpstreamTimeEitherWay) {
    EXPECT_DOUBLE_EQ(final_charge(Ending::Complete, 300, sent(800), 800, 1), 800);  // more than the estimate
    EXPECT_DOUBLE_EQ(final_charge(Ending::Complete, 300, sent(2), 2, 1), 2);        // refund the rest
}

TEST(Settle, NoUpstreamIsFreeFailureAndTimeoutPayTheTime) {
    EXPECT_DOUBLE_EQ(final_charge(Ending::NoUpstream, 300, Timing{}, 0, 1), 0);
    EXPECT_DOUBLE_EQ(final_charge(Ending::Failed, 300, Timing{}, 0, 1), 0);              // connect refused
    EXPECT_DOUBLE_EQ(final_charge(Ending::Failed, 300, sent(60000), 60000, 1), 60000);  // a hung upstream
    EXPECT_DOUBLE_EQ(final_charge(Ending::Broken, 300, sent(120), 120, 1), 120);
}

TEST(Settle, LeavingEarlySavesNothing) {
    EXPECT_DOUBLE_EQ(final_charge(Ending::Abandoned, 300, sent(100), 100, 1), 300);
    EXPECT_DOUBLE_EQ(final_charge(Ending::Abandoned, 300, sent(900), 900, 1), 900);
}

TEST(Settle, ASlowReaderKeepsNoRefundBelowItsEstimate) {
    // 5 s of wall time, 4.99 s of it waiting on the client: what the upstream
    // did meanwhile is hidden, so the estimate stands.
    EXPECT_DOUBLE_EQ(final_charge(Ending::Complete, 300, sent(5000, 4990), 10, 1), 300);
    // ...unless the whole exchange took less than the estimate.
    EXPECT_DOUBLE_EQ(final_charge(Ending::Complete, 300, sent(100, 60), 40, 1), 100);
    // Above the estimate it pays the upstream's own time.
    EXPECT_DOUBLE_EQ(final_charge(Ending::Complete, 300, sent(5000, 1000), 4000, 1), 4000);
    // A few ms of blocking is a network hiccup, not a slow reader.
    EXPECT_DOUBLE_EQ(final_charge(Ending::Complete, 300, sent(20, 5), 15, 1), 15);
}

TEST(Settle, CoalescedRequestsShareOneUpstreamTime) {
    // Four shared a 1 s call: each pays 250, together the one second.
    EXPECT_DOUBLE_EQ(final_charge(Ending::Complete, 300, Timing{}, 1000, 4), 250);
    EXPECT_DOUBLE_EQ(final_charge(Ending::Failed, 300, Timing{}, 4000, 4), 1000);
    EXPECT_DOUBLE_EQ(final_charge(Ending::Complete, 300, Timing{}, 1000, 0), 1000);  // never divides by zero
}

TEST(Settle, ChargeModeParses) {
    EXPECT_EQ(parse_charge_mode("measured"), ChargeMode::Measured);
    EXPECT_EQ(parse_charge_mode("estimate"), ChargeMode::Estimate);
    EXPECT_THROW(parse_charge_mode("Measured"), std::runtime_error);
    EXPECT_EQ(Config{}.charge, ChargeMode::Estimate);  // old configs keep their meaning
    EXPECT_EQ(format_ms(801.4634), "801.463");
}

TEST(Settle, CoalescerTellsEveryoneHowManyShared) {
    Coalescer c;
    ASSERT_TRUE(c.join("k", nullptr));
    std::vector<std::size_t> seen;
    for (int i = 0; i < 3; ++i) ASSERT_FALSE(c.join("k", [&](const FlightResult& r) { seen.push_back(r.sharers); }));
    FlightResult r{FlightResult::Kind::Response, nullptr, false, {}};
    r.upstream_ms = 1000;
    EXPECT_EQ(c.finish("k", r), 4u);
    EXPECT_EQ(seen, (std::vector<std::size_t>{4, 4, 4}));
    EXPECT_EQ(c.finish("gone", r), 1u);
}

TEST(Settle, CostUnitIsMilliseconds) {
    char path[] = "/tmp/settle_cfgXXXXXX";
    const int fd = mkstemp(path);
    ASSERT_GE(fd, 0);
    const std::string bad = "cost: {unit: units}\n";
    ASSERT_EQ(write(fd, bad.data(), bad.size()), static_cast<ssize_t>(bad.size()));
    close(fd);
    try {
        load_config_file(path, Config{});
        ADD_FAILURE() << "cost.unit: units was accepted";
    } catch (const std::runtime_error& e) {
        EXPECT_NE(std::string(e.what()).find("milliseconds"), std::string::npos) << e.what();
    }
    std::ofstream(path) << "cost: {unit: ms}\ncharge: measured\n";
    EXPECT_EQ(load_config_file(path, Config{}).charge, ChargeMode::Measured);
    unlink(path);
}
