// The SQLSTATEs a refusal raises (doc/errors.md): implementation-defined
// subclasses of class 53 (insufficient resources: retry later) and class 54
// (program limit exceeded: it will never fit).
#pragma once
#include "ext/pg.hpp"

#include <algorithm>
#include <cmath>

namespace ot::ext {

inline const int kBudgetExhausted = MAKE_SQLSTATE('5', '3', 'T', '0', '1');
inline const int kCostExceedsCapacity = MAKE_SQLSTATE('5', '4', 'T', '0', '1');

// What a HINT promises: whole seconds, at least one.
inline int retry_seconds(double s) { return std::max(1, static_cast<int>(std::ceil(s))); }

}  // namespace ot::ext
