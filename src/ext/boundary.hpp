// The one room where C++ meets PostgreSQL's error machinery.
//
// Two rules keep ereport's longjmp and C++ unwinding apart:
//  1. Every SQL-callable function is declared with OT_SQL_FUNCTION and every
//     hook runs its body in guard(); both catch every C++ exception and raise
//     the PostgreSQL error only after the catch scope has been left.
//  2. Code that calls PostgreSQL (anything that may ereport) either holds no
//     C++ object with a non-trivial destructor in any frame between it and
//     entry(), or makes the call through pg_call(), which turns the
//     PostgreSQL error into a C++ exception so destructors run.
// Nothing else in src/ext calls PG_TRY, ReThrowError or catches exceptions.
#pragma once
#include "ext/pg.hpp"

#include <exception>
#include <new>
#include <type_traits>
#include <utility>

namespace ot::ext {

// An error decided by our own code: plain data, so it can outlive a catch block.
struct ErrorSpec {
    int sqlstate;
    char message[256];
    char detail[512];
    char hint[256];
};

class Error final : public std::exception {
public:
    explicit Error(const ErrorSpec& s) : spec(s) {}
    const char* what() const noexcept override { return spec.message; }
    ErrorSpec spec;
};

// A PostgreSQL error caught by pg_call, carried up to entry() to be rethrown.
class CaughtPgError final : public std::exception {
public:
    explicit CaughtPgError(ErrorData* e) : edata(e) {}
    const char* what() const noexcept override { return "PostgreSQL error"; }
    ErrorData* edata;
};

ErrorSpec make_error(int sqlstate, const char* message, const char* detail = nullptr, const char* hint = nullptr);

[[noreturn]] void raise(const ErrorSpec& spec);

namespace detail {
[[noreturn]] void rethrow_pg(ErrorData* edata);
ErrorSpec internal_error(const char* what);
ErrorSpec out_of_memory();
ErrorData* capture_pg_error(MemoryContext back_to);
}  // namespace detail

// Runs body; any C++ exception becomes a PostgreSQL ERROR raised after the
// catch scope has been left. For SQL functions (entry) and hooks (guard).
template <class R, class Body>
R guarded(Body&& body) {
    // Only trivially destructible locals here: a body that ereports directly
    // longjmps through this frame.
    ErrorSpec spec;
    ErrorData* pg_error = nullptr;
    try {
        return body();
    } catch (const Error& e) {
        spec = e.spec;
    } catch (const CaughtPgError& e) {
        pg_error = e.edata;
    } catch (const std::bad_alloc&) {
        spec = detail::out_of_memory();
    } catch (const std::exception& e) {
        spec = detail::internal_error(e.what());
    } catch (...) {
        spec = detail::internal_error("unknown C++ exception");
    }
    if (pg_error != nullptr) detail::rethrow_pg(pg_error);
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

template <class F>
auto pg_call(F&& f) -> decltype(f()) {
    using R = decltype(f());
    static_assert(std::is_void_v<R> || std::is_trivially_copyable_v<R>,
                  "pg_call results must be plain data");
    MemoryContext caller = CurrentMemoryContext;
    ErrorData* volatile edata = nullptr;
    if constexpr (std::is_void_v<R>) {
        PG_TRY();
        { f(); }
        PG_CATCH();
        { edata = detail::capture_pg_error(caller); }
        PG_END_TRY();
        if (edata != nullptr) throw CaughtPgError(edata);
    } else {
        R result{};
        PG_TRY();
        { result = f(); }
        PG_CATCH();
        { edata = detail::capture_pg_error(caller); }
        PG_END_TRY();
        if (edata != nullptr) throw CaughtPgError(edata);
        return result;
    }
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
