#include "gate/redis_script.hpp"

#include <openssl/sha.h>

#include <cstdio>

namespace ot::gate::redis {
namespace {

// Every step mirrors core/gcra.cpp in the same order of operations, so the
// doubles round the same way and the decisions match bit for bit. A TAT is
// stored as "<sec> <nsec>" (a Lua number cannot hold epoch nanoseconds) and
// handled as nanoseconds after the current second.
const char* const kScript = R"LUA(
local NANOS = 1e9
local MAX_DEBT = 1e6 * NANOS
local op, x = ARGV[1], tonumber(ARGV[2])
local cap, rate = tonumber(ARGV[3]), tonumber(ARGV[4])
if not (x and cap and rate) or x ~= x or cap <= 0 or rate <= 0 or cap / rate > 1e5
   or (op == 'admit' and x < 0) then
  return redis.error_reply('ERR ogc_throttle gcra: bad arguments')
end

local now_s, now, extra_ttl
if ARGV[5] then
  local s, n = string.match(ARGV[5], '^(%d+) (%d+)$')
  now_s, now, extra_ttl = tonumber(s), tonumber(n), 3600000
else
  local t = redis.call('TIME')
  now_s, now, extra_ttl = tonumber(t[1]), tonumber(t[2]) * 1000, 0
end

local function round(v)  -- llround for v >= 0
  local f = math.floor(v)
  if v - f >= 0.5 then return f + 1 end
  return f
end
local function charge_ns(cost)
  if cost <= 0 then return 0 end
  local ns = cost * NANOS / rate
  if not (ns < MAX_DEBT) then return MAX_DEBT end
  return math.max(1, round(ns))
end
local function tokens_for(debt)
  local t = cap - debt * rate / NANOS
  if t < 0 then return 0 end
  if t > cap then return cap end
  return t
end
local function fmt(v) return string.format('%.17g', v) end
local function tat_string(v)
  local s = math.floor(v / NANOS)
  return string.format('%d %d', now_s + s, v - s * NANOS)
end

local tat = now
local stored = redis.call('GET', KEYS[1])
if stored then
  local s, n = string.match(stored, '^(%-?%d+) (%d+)$')
  if s then tat = (tonumber(s) - now_s) * NANOS + tonumber(n) end
end

-- A full bucket (TAT at or before now) is no key at all; a key lives until
-- its bucket is full again: at most one refill, or the debt a settle left.
local function store(v)
  if v > now then
    redis.call('SET', KEYS[1], tat_string(v), 'PX', math.ceil((v - now) / 1e6) + extra_ttl)
  else
    redis.call('DEL', KEYS[1])
  end
end

if op == 'admit' then
  local base = math.max(tat, now)
  local debt = base - now
  local tau0 = round(cap * NANOS / rate)
  local tau = tau0 + math.floor(tau0 / 1000000)
  if x > cap then
    return {2, fmt(tokens_for(debt)), '0', fmt(debt / NANOS), tat_string(tat)}
  end
  local after = debt + charge_ns(x)
  if after <= tau then
    local new = base + (after - debt)
    store(new)
    return {0, fmt(tokens_for(after)), '0', fmt(after / NANOS), tat_string(new)}
  end
  return {1, fmt(tokens_for(debt)), fmt((after - tau) / NANOS), fmt(debt / NANOS), tat_string(tat)}
elseif op == 'settle' then
  local new = tat
  if x > 0 then
    local base = math.max(tat, now)
    local room = math.max(now + MAX_DEBT - base, 0)
    new = base + math.min(charge_ns(x), room)
  elseif x < 0 then
    new = math.max(tat - charge_ns(-x), math.min(tat, now))
  end
  store(new)
  local debt = math.max(new - now, 0)
  local debt_s = debt / NANOS
  return {0, fmt(cap - debt_s * rate), '0', fmt(debt_s), tat_string(new)}
end
return redis.error_reply('ERR ogc_throttle gcra: unknown operation')
)LUA";

}  // namespace

const std::string& gcra_script() {
    static const std::string s(kScript);
    return s;
}

const std::string& gcra_script_sha1() {
    static const std::string hex = [] {
        unsigned char md[SHA_DIGEST_LENGTH];
        SHA1(reinterpret_cast<const unsigned char*>(gcra_script().data()), gcra_script().size(), md);
        std::string h;
        char b[3];
        for (unsigned char c : md) {
            std::snprintf(b, sizeof b, "%02x", c);
            h += b;
        }
        return h;
    }();
    return hex;
}

}  // namespace ot::gate::redis
