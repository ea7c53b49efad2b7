# ogc-gate: the OGC-aware edge (Boost.Beast), its unit tests and fuzz target.
# Included by the top-level Makefile; CORE_OBJS and CORE_CXXFLAGS come from there.

GATE_CXXFLAGS = -std=c++17 -O2 -g -Wall -Wextra -Isrc -pthread
GATE_SRCS     := $(filter-out src/gate/main.cpp,$(wildcard src/gate/*.cpp))
# Pure parts (no sockets): what the unit tests and the fuzzer link.
GATE_PURE     := cells cell_config cell_request settle text log_line http_head net kvp path canonical request request_path bodies config caps coverage pricing jwt identity ogc_error decision buckets coalescer concurrency upstream_pool inimage upstream_url access_log prom_text conn_limits metrics log_writer
# The capabilities rewrite (expat).
GATE_PURE     += capabilities capabilities_doc capabilities_url capabilities_config capabilities_relay capabilities_scan oapi_json oapi_html
GATE_PURE_SRCS := $(addprefix src/gate/,$(addsuffix .cpp,$(GATE_PURE)))
GATE_OBJS     := $(patsubst src/gate/%.cpp,build/gate/%.o,$(GATE_SRCS))
GATE_PURE_OBJS := $(patsubst src/gate/%.cpp,build/gate/%.o,$(GATE_PURE_SRCS))
GATE_LIBS     = -lyaml-cpp -lpugixml -lboost_program_options -lgd -lcrypto -pthread
GATE_LIBS    += -lexpat

all: bin/ogc-gate
unit: build/gate/gate_unit

build/gate/%.o: src/gate/%.cpp
	@mkdir -p build/gate
	$(CXX) $(GATE_CXXFLAGS) -MMD -MP -c -o $@ $<

bin/ogc-gate: $(GATE_OBJS) build/gate/main.o $(CORE_OBJS)
	@mkdir -p bin
	$(CXX) $(GATE_CXXFLAGS) -o $@ $^ $(GATE_LIBS)

GATE_TEST_SRCS := $(wildcard test/gate/*_test.cpp)
# One object per test file: they compile in parallel, and an edit rebuilds one.
GATE_TEST_OBJS := $(patsubst test/gate/%.cpp,build/gate/test/%.o,$(GATE_TEST_SRCS))
build/gate/test/%.o: test/gate/%.cpp
	@mkdir -p build/gate/test
	$(CXX) $(GATE_CXXFLAGS) -MMD -MP -c -o $@ $<
build/gate/gate_unit: $(GATE_TEST_OBJS) $(GATE_PURE_OBJS) $(CORE_OBJS)
	$(CXX) $(GATE_CXXFLAGS) -o $@ $(GATE_TEST_OBJS) $(GATE_PURE_OBJS) $(CORE_OBJS) $(GATE_LIBS) -lgtest -lgtest_main

# libFuzzer target over the request parsers and caps; everything recompiled
# with clang and the sanitizers (core sources too, for coverage).
FUZZ_CXX ?= clang++
FUZZ_FLAGS = -std=c++17 -g -O1 -Isrc -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined
build/fuzz/gate_parsers: test/fuzz/gate_parsers_fuzz.cpp $(GATE_PURE_SRCS) $(CORE_SRCS)
	@mkdir -p build/fuzz
	$(FUZZ_CXX) $(FUZZ_FLAGS) -o $@ $^ -lyaml-cpp -lpugixml -lgd -lcrypto -lexpat

.PHONY: gate fuzz-gate install-gate clean-gate
gate: bin/ogc-gate
fuzz-gate: build/fuzz/gate_parsers

install: install-gate
install-gate: bin/ogc-gate
	install -d $(DESTDIR)/usr/local/bin
	install -m 755 bin/ogc-gate $(DESTDIR)/usr/local/bin/ogc-gate

clean: clean-gate
clean-gate:
	rm -rf bin/ogc-gate build/gate build/gate-faults build/fuzz

-include $(GATE_OBJS:.o=.d) build/gate/main.d $(GATE_TEST_OBJS:.o=.d)

# The capabilities rewrite as a filter (stdin -> stdout) for test/gate/capabilities.t.sh,
# and its benchmark (bench/gate/capabilities_bench.cpp; see doc/capabilities.md).
CAPS_OBJS := build/gate/capabilities.o build/gate/capabilities_doc.o build/gate/capabilities_url.o build/gate/capabilities_scan.o build/gate/oapi_json.o build/gate/text.o
build/gate/capabilities_cli: test/gate/capabilities_cli.cpp $(CAPS_OBJS)
	$(CXX) $(GATE_CXXFLAGS) -o $@ $^ -lexpat
build/gate/capabilities_bench: bench/gate/capabilities_bench.cpp $(CAPS_OBJS)
	$(CXX) $(GATE_CXXFLAGS) -o $@ $^ -lexpat
# libFuzzer target for the capabilities rewrite (test/gate/capabilities_fuzz.t.sh).
CAPS_FUZZ_SRCS := test/gate/capabilities_fuzz.cpp src/gate/capabilities.cpp src/gate/capabilities_doc.cpp src/gate/capabilities_url.cpp src/gate/capabilities_scan.cpp src/gate/oapi_json.cpp src/gate/text.cpp
build/fuzz/capabilities: $(CAPS_FUZZ_SRCS) $(wildcard src/gate/capabilities*.hpp)
	@mkdir -p build/fuzz
	$(FUZZ_CXX) $(FUZZ_FLAGS) -o $@ $(CAPS_FUZZ_SRCS) -lexpat

# The gate with test-only fault injection at every completion handler
# (test/gate/handler_faults.t.sh): the files that see Session's layout are
# compiled again with OGC_GATE_FAULTS; the rest is shared with bin/ogc-gate.
GATE_FAULT_SRCS := admin server session session_io upstream_client upstream_relay settle_session session_cells
GATE_FAULT_OBJS := $(patsubst %,build/gate-faults/%.o,$(GATE_FAULT_SRCS)) build/gate-faults/fault_injection.o
build/gate-faults/%.o: src/gate/%.cpp
	@mkdir -p build/gate-faults
	$(CXX) $(GATE_CXXFLAGS) -DOGC_GATE_FAULTS -MMD -MP -c -o $@ $<
build/gate-faults/fault_injection.o: test/gate/fault_injection.cpp
	@mkdir -p build/gate-faults
	$(CXX) $(GATE_CXXFLAGS) -DOGC_GATE_FAULTS -MMD -MP -c -o $@ $<
build/gate/ogc-gate-faults: $(GATE_FAULT_OBJS) $(filter-out $(patsubst %,build/gate/%.o,$(GATE_FAULT_SRCS)),$(GATE_OBJS)) build/gate/main.o $(CORE_OBJS)
	$(CXX) $(GATE_CXXFLAGS) -o $@ $^ $(GATE_LIBS)
unit: build/gate/ogc-gate-faults
-include $(GATE_FAULT_OBJS:.o=.d)
