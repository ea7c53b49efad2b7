# Shared buckets in Redis (doc/shared-buckets.md), included by the top-level
# Makefile after component.mk. hiredis speaks the protocol; Asio the sockets.
GATE_REDIS      := redis_resp redis_script redis_client redis_metrics redis_refusal_cache redis_store store_config
GATE_REDIS_OBJS := $(patsubst %,build/gate/%.o,$(GATE_REDIS))
# bin/ogc-gate links every src/gate object (GATE_SRCS is a wildcard).
GATE_LIBS       += -lhiredis
# The unit binary links GATE_PURE_OBJS when its recipe runs: the store's
# tests (test/gate/redis_*_test.cpp) need these too.
GATE_PURE_OBJS  += $(GATE_REDIS_OBJS)
build/gate/gate_unit: $(GATE_REDIS_OBJS)

# The TAP test's driver and the latency benchmark.
build/gate/redis_probe: test/gate/redis_probe.cpp $(GATE_REDIS_OBJS) build/gate/text.o $(CORE_OBJS)
	$(CXX) $(GATE_CXXFLAGS) -o $@ $^ $(GATE_LIBS)
build/gate/redis_store_bench: bench/gate/redis_store_bench.cpp $(GATE_REDIS_OBJS) build/gate/text.o build/gate/buckets.o $(CORE_OBJS)
	$(CXX) $(GATE_CXXFLAGS) -o $@ $^ $(GATE_LIBS)
unit: build/gate/redis_probe
# The gate's config reads the `buckets` mapping: the fuzz target links its parser.
build/fuzz/gate_parsers: src/gate/store_config.cpp
