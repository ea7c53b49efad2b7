// The address scan's search: where the next "://" (or JSON's ":\/\/") starts.
// Vectorised because capabilities are full of ':' (namespace prefixes, EPSG:…)
// and the pair ':' + '/' is rare: 64 bytes are nearly always decided at once.
#include <cstring>
#include <string_view>
#ifdef __SSE2__
#include <emmintrin.h>
#endif
#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define OT_SCAN_AVX2 1
#endif

#include "gate/capabilities_url.hpp"

namespace ot::gate {
namespace {

// 3 when "://" starts at `at`, 5 for JSON's ":\/\/", else 0 (also when cut).
std::size_t separator_at(std::string_view b, std::size_t at, bool json) {
    if (at + 2 < b.size() && b[at + 1] == '/' && b[at + 2] == '/') return 3;
    if (json && at + 4 < b.size() && b[at + 1] == '\\' && b[at + 2] == '/' && b[at + 3] == '\\' && b[at + 4] == '/')
        return 5;
    return 0;
}


template <bool Json>
std::size_t find_separator(std::string_view buf, std::size_t from, std::size_t* sep_len) {
    const char* p = buf.data();
    const std::size_t n = buf.size();
    std::size_t i = from;
#ifdef __SSE2__
    // ':' whose next byte is '/' (or '\\'): ':' alone is frequent in
    // capabilities (namespace prefixes, EPSG:…), the pair is rare, so 64 bytes
    // at a time are nearly always decided by one test of four blocks' masks.
    const __m128i colon = _mm_set1_epi8(':'), slash = _mm_set1_epi8('/'), bsl = _mm_set1_epi8('\\');
    auto pairs = [&](const char* q) {
        const __m128i a = _mm_loadu_si128(reinterpret_cast<const __m128i*>(q));
        const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(q + 1));
        __m128i next = _mm_cmpeq_epi8(b, slash);
        if (Json) next = _mm_or_si128(next, _mm_cmpeq_epi8(b, bsl));
        return _mm_and_si128(_mm_cmpeq_epi8(a, colon), next);
    };
    for (;;) {
        if (i + 65 <= n) {
            const __m128i m0 = pairs(p + i), m1 = pairs(p + i + 16), m2 = pairs(p + i + 32), m3 = pairs(p + i + 48);
            if (_mm_movemask_epi8(_mm_or_si128(_mm_or_si128(m0, m1), _mm_or_si128(m2, m3))) == 0) {
                i += 64;
                continue;
            }
        } else if (i + 17 > n) {
            break;
        }
        unsigned mask = static_cast<unsigned>(_mm_movemask_epi8(pairs(p + i)));
        while (mask) {
            const std::size_t at = i + static_cast<std::size_t>(__builtin_ctz(mask));
            mask &= mask - 1;
            if (std::size_t l = separator_at(buf, at, Json)) {
                *sep_len = l;
                return at;
            }
        }
        i += 16;
    }
#endif
    while (i < n) {
        const void* c = std::memchr(p + i, ':', n - i);
        if (!c) break;
        const std::size_t at = static_cast<std::size_t>(static_cast<const char*>(c) - p);
        if (std::size_t l = separator_at(buf, at, Json)) {
            *sep_len = l;
            return at;
        }
        i = at + 1;
    }
    return std::string_view::npos;
}

#ifdef OT_SCAN_AVX2
// The same 64 bytes at a time in two 32-byte vectors, on CPUs with AVX2 (the
// baseline build has SSE2 only): half the instructions of the SSE2 loop.
template <bool Json>
__attribute__((target("avx2"))) std::size_t find_separator_avx2(std::string_view buf, std::size_t from,
                                                                std::size_t* sep_len) {
    const char* p = buf.data();
    const std::size_t n = buf.size();
    std::size_t i = from;
    const __m256i colon = _mm256_set1_epi8(':'), slash = _mm256_set1_epi8('/'), bsl = _mm256_set1_epi8('\\');
    auto pairs = [&](const char* q) __attribute__((target("avx2"))) {
        const __m256i a = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q));
        const __m256i b = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q + 1));
        __m256i next = _mm256_cmpeq_epi8(b, slash);
        if (Json) next = _mm256_or_si256(next, _mm256_cmpeq_epi8(b, bsl));
        return _mm256_and_si256(_mm256_cmpeq_epi8(a, colon), next);
    };
    while (i + 65 <= n) {
        const __m256i m0 = pairs(p + i), m1 = pairs(p + i + 32);
        if (_mm256_testz_si256(_mm256_or_si256(m0, m1), _mm256_or_si256(m0, m1))) {
            i += 64;
            continue;
        }
        for (const __m256i& m : {m0, m1}) {
            unsigned mask = static_cast<unsigned>(_mm256_movemask_epi8(m));
            while (mask) {
                const std::size_t at = i + static_cast<std::size_t>(__builtin_ctz(mask));
                mask &= mask - 1;
                if (std::size_t l = separator_at(buf, at, Json)) {
                    *sep_len = l;
                    return at;
                }
            }
            i += 32;
        }
    }
    return find_separator<Json>(buf, i, sep_len);  // the tail
}

bool has_avx2() {
    __builtin_cpu_init();  // may run before main (a static initializer)
    return __builtin_cpu_supports("avx2");
}
const bool kHasAvx2 = has_avx2();
#endif

}  // namespace

std::size_t find_scheme_separator(std::string_view buf, std::size_t from, bool json, std::size_t* sep_len) {
#ifdef OT_SCAN_AVX2
    if (kHasAvx2) return json ? find_separator_avx2<true>(buf, from, sep_len) : find_separator_avx2<false>(buf, from, sep_len);
#endif
    return json ? find_separator<true>(buf, from, sep_len) : find_separator<false>(buf, from, sep_len);
}

}  // namespace ot::gate
