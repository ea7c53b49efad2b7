#pragma once
// The bytes of a capabilities fixture (test/gate/fixtures/capabilities/NAME), shared by the
// rewriter's XML and JSON tests; an empty or missing file fails the calling test.
#include <fstream>
#include <sstream>
#include <string>

#include <gtest/gtest.h>

inline std::string fixture(const std::string& name) {
    std::string dir = __FILE__;
    dir = dir.substr(0, dir.rfind('/'));
    std::ifstream f(dir + "/fixtures/capabilities/" + name, std::ios::binary);
    std::stringstream ss;
    ss << f.rdbuf();
    EXPECT_FALSE(ss.str().empty()) << name;
    return ss.str();
}
