// The GCRA of core/gcra.hpp as one Redis Lua script, so that every gate of a
// fleet charges one bucket per key atomically on the Redis clock.
#pragma once
#include <string>

namespace ot::gate::redis {

// KEYS[1] bucket key; ARGV: op ("admit" | "settle"), cost or delta,
// capacity, rate, and (tests only) a fixed now as "<sec> <nsec>".
// Replies {code, remaining, retry_after_s, reset_after_s, tat}: code 0
// allowed (settle: done), 1 refused, 2 never fits; numbers as %.17g
// strings (Redis truncates Lua numbers to integers); tat as "<sec> <nsec>".
const std::string& gcra_script();
// Lowercase hex SHA-1 of the script, what SCRIPT LOAD answers and EVALSHA takes.
const std::string& gcra_script_sha1();

// Budgets the script can follow to the nanosecond: doubles hold integers up
// to 2^53, so times are kept relative to the current second and a debt is
// capped at kMaxDebtSeconds (core caps at 1e9 s; nothing real reaches either).
inline constexpr double kMaxDebtSeconds = 1e6;
inline constexpr double kMaxRefillSeconds = 1e5;

}  // namespace ot::gate::redis
