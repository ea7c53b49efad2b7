-- wrk script: at the end of a run, appends the run's recorded latency
-- distribution to the file named by $LAT_OUT, one "microseconds count" line
-- per distinct value, so that many short runs can be pooled into one
-- distribution (bench/gate/run.sh, LAT_MODE=pooled). wrk's stats object:
-- #latency is the number of distinct values, latency(i) their i-th (value, count).
function done(summary, latency, requests)
  local f = assert(io.open(os.getenv("LAT_OUT"), "a"))
  for i = 1, #latency do
    local v, c = latency(i)
    f:write(string.format("%d %d\n", v, c))
  end
  f:close()
end
