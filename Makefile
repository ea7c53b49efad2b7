# ogc_throttle: the PostgreSQL extension (PGXS), the core library and its tests.
# `make` builds, `make install` installs, `make unit` builds the unit tests;
# scripts/test.sh runs every suite.

EXTENSION   = ogc_throttle
MODULE_big  = ogc_throttle
DATA        = extension/ogc_throttle--0.1.sql extension/ogc_throttle--0.1--0.2.sql
PG_CONFIG  ?= pg_config

CORE_SRCS := $(wildcard src/core/*.cpp)
CORE_OBJS := $(CORE_SRCS:.cpp=.o)
EXT_SRCS  := $(wildcard src/ext/*.cpp)
OBJS       = $(EXT_SRCS:.cpp=.o) $(CORE_OBJS)

REGRESS     = setup spend estimators privileges views hook_shapes hook_modes hook_schema hook_fidelity density_shared metering upgrade

WARNINGS   = -Wall -Wextra -Wno-unused-parameter -Wno-missing-field-initializers
PG_CXXFLAGS = -std=c++17 $(WARNINGS) -Wno-register -Isrc -MMD -MP
SHLIB_LINK += -lstdc++
# Calls between the extension's own functions bind inside the library (no PLT stub and
# GOT load per call), and calls into PostgreSQL go through the GOT without a PLT stub:
# the hook runs on every statement, with its code mostly out of the caches (bench/hook).
PG_CXXFLAGS += -fno-plt
SHLIB_LINK += -Wl,-Bsymbolic-functions
EXTRA_CLEAN = $(CORE_OBJS) src/core/*.d src/ext/*.d test/unit/*.o test/unit/run_unit

# JIT inlining of a handful of C++ functions is not worth a second (clang) build.
override with_llvm = no

PGXS := $(shell $(PG_CONFIG) --pgxs)
include $(PGXS)

# src/core is shared with the gate and must not see PostgreSQL or Asio. Its
# objects are built without PostgreSQL's include path (so `#include "postgres.h"`
# cannot compile) and the sources are checked for either include.
CORE_CXXFLAGS = -std=c++17 -O2 -g -fPIC $(WARNINGS) -Werror -Isrc
src/core/%.o: src/core/%.cpp | core-purity
	$(CXX) $(CORE_CXXFLAGS) -MMD -MP -c -o $@ $<

CORE_PURITY_SRCS ?= $(wildcard src/core/*.hpp src/core/*.cpp)
.PHONY: core-purity print-core-cxxflags
core-purity:
	@if grep -nE '^\s*#\s*include\s*[<"](postgres|postgres_ext|fmgr|pg_config|boost/asio|boost/beast)' $(CORE_PURITY_SRCS); then \
	  echo "src/core must not include PostgreSQL or Asio headers" >&2; exit 1; fi
print-core-cxxflags:
	@echo $(CORE_CXXFLAGS)

-include $(CORE_OBJS:.o=.d) $(EXT_SRCS:.cpp=.d)

# Unit tests (GoogleTest) for the core.
UNIT_SRCS := $(wildcard test/unit/*.cpp)
test/unit/run_unit: $(UNIT_SRCS) $(CORE_OBJS)
	$(CXX) $(CORE_CXXFLAGS) -o $@ $(UNIT_SRCS) $(CORE_OBJS) -lgtest_main -lgtest -pthread

.PHONY: unit
unit: test/unit/run_unit

# bench/hook's density-grid descent, from the root and from the jump index (not built by `all`).
bench/hook/grid_descent: bench/hook/grid_descent.cpp $(CORE_OBJS)
	$(CXX) $(CORE_CXXFLAGS) -o $@ $< $(CORE_OBJS)

# bench/hook's floor: a library that only reads the clock where the metering must (not built by `all`).
bench/hook/clock_floor.so: bench/hook/clock_floor.c
	$(CC) -O2 -Wall -fPIC -shared -I$(shell $(PG_CONFIG) --includedir-server) -o $@ $<
bench/hook/clock_floor_tsc.so: bench/hook/clock_floor.c
	$(CC) -O2 -Wall -fPIC -shared -DFLOOR_TSC -I$(shell $(PG_CONFIG) --includedir-server) -o $@ $<

# bench/fidelity's offline check of the self-calibration's fit (not built by `all`).
bench/fidelity/fitcheck: bench/fidelity/fitcheck.cpp $(CORE_OBJS)
	$(CXX) $(CORE_CXXFLAGS) -o $@ $< $(CORE_OBJS)

# The gate and other components add their own targets here. `COMPONENTS=`
# (empty) builds and installs the extension alone, as debian/rules does.
COMPONENTS ?= $(wildcard src/*/component.mk)
-include $(COMPONENTS)
# Shared buckets in Redis extend the gate's variables: after its component.mk.
-include $(if $(filter src/gate/component.mk,$(COMPONENTS)),src/gate/redis.mk)

.PHONY: print-regress
print-regress:
	@echo $(REGRESS)
