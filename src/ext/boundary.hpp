// The one room where C++ meets PostgreSQL's error machinery.
//
// Two rules keep ereport's longjmp and C++ unwinding apart:
//  1. Every SQL-callable function is declared with OT_SQL_FUNCTION and every
//     hook runs its body in guard(); both catch every C++ exception and raise
//     the PostgreSQL error only after the catch scope has been left.
//  2. Code in src/ext reports errors with ereport, from frames that hold no
//     C++ object with a non-trivial destructor, and throws no C++ exception:
//     much of it runs under PostgreSQL's C tree walkers, which an exception
//     must not cross. The one container (the SRID cache) catches its own
//     allocation failures. guard() and entry() are the backstop.
// PG_TRY appears only where PostgreSQL's own cleanup needs it (a waiter's
// refund, a subtransaction around a PostGIS call), in such C-style frames.
#pragma once
#include "ext/pg.hpp"

#include <exception>
#include <new>
#include <utility>

namespace ot::ext {

// An error decided by our own code: plain data, so it can outlive a catch block.
struct ErrorSpec {
    int sqlstate;
    char message[256];
    char detail[512];
    char hint[256];
};

ErrorSpec make_error(int sqlstate, const char* message, const char* detail = nullptr, const char* hint = nullptr);

[[noreturn]] void raise(const ErrorSpec& spec);

namespace detail {
ErrorSpec internal_error(const char* what);
ErrorSpec out_of_memory();
}  // namespace detail

// Runs body; any C++ exception becomes a PostgreSQL ERROR raised after the
// catch scope has been left. For SQL functions (entry) and hooks (guard).
template <class R, class Body>
R guarded(Body&& body) {
    // Only trivially destructible locals here: a body that ereports directly
    // longjmps through this frame.
    ErrorSpec spec;
    try {
        return body();
    } catch (const std::bad_alloc&) {
        spec = detail::out_of_memory();
    } catch (const std::exception& e) {
        spec = detail::internal_error(e.what());
    } catch (...) {
        spec = detail::internal_error("unknown C++ exception");
    }
    raise(spec);
}

template <class Body>
Datum entry(Body&& body) {
    return guarded<Datum>(std::forward<Body>(body));
}

template <class Body>
void guard(Body&& body) {
    guarded<void>(std::forward<Body>(body));
}

}  // namespace ot::ext

// Declares an SQL-callable function whose body runs inside entry().
#define OT_SQL_FUNCTION(name)                                                         \
    extern "C" {                                                                      \
    PG_FUNCTION_INFO_V1(name);                                                        \
    }                                                                                 \
    static Datum name##_body(FunctionCallInfo fcinfo);                                \
    extern "C" Datum name(PG_FUNCTION_ARGS) {                                         \
        return ot::ext::entry([fcinfo]() -> Datum { return name##_body(fcinfo); });   \
    }                                                                                 \
    static Datum name##_body(FunctionCallInfo fcinfo)
