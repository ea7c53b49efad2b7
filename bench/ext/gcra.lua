-- The same GCRA bucket in Redis: KEYS[1] holds the TAT (epoch seconds);
-- ARGV = cost, capacity, rate. Returns tokens left, or an error when refused.
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1e6
local cost, cap, rate = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local tat = tonumber(redis.call('GET', KEYS[1])) or now
if tat < now then tat = now end
local new = tat + cost / rate
if new - now > cap / rate then
  return redis.error_reply('budget exhausted')
end
-- A full bucket is no key at all, as in the extension.
redis.call('SET', KEYS[1], string.format('%.6f', new), 'PX', math.floor((new - now) * 1000) + 1)
return tostring(cap - (new - now) * rate)
