// Rewrites a capabilities document from stdin to stdout in chunks, as the gate
// will on its response path; what it did goes to stderr. For the TAP test
// (test/gate/capabilities.t.sh), which puts it behind a stand-in front.
//   capabilities_cli --public URL --origin URL [--origin URL…] [--max-width N]
//                    [--max-height N] [--layer-limit N] [--count-default N] [--chunk BYTES]
//                    [--full-parse 1] [--json BUFFER_LIMIT]
// --json: the OGC API JSON rewriter instead (oapi_json.hpp); BUFFER_LIMIT 0 streams.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "gate/capabilities.hpp"
#include "gate/oapi_json.hpp"

using namespace ot::gate;

int main(int argc, char** argv) {
    CapabilityLimits l;
    std::size_t chunk = 16384;
    long long json = -1;
    for (int i = 1; i + 1 < argc; i += 2) {
        std::string k = argv[i], v = argv[i + 1];
        if (k == "--public") l.public_base = v;
        else if (k == "--origin") l.rewrite_origins.push_back(v);
        else if (k == "--max-width") l.max_width = std::atoll(v.c_str());
        else if (k == "--max-height") l.max_height = std::atoll(v.c_str());
        else if (k == "--layer-limit") l.layer_limit = std::atoll(v.c_str());
        else if (k == "--count-default") l.count_default = std::atoll(v.c_str());
        else if (k == "--full-parse") l.full_parse = v == "1";
        else if (k == "--json") json = std::atoll(v.c_str());
        else if (k == "--chunk") chunk = std::strtoull(v.c_str(), nullptr, 10);
        else {
            std::fprintf(stderr, "unknown option %s\n", k.c_str());
            return 2;
        }
    }
    if (chunk == 0) chunk = 1;
    CapabilitiesRewriter x(l);
    OapiRewriter j(l, json < 0 ? 0 : static_cast<std::size_t>(json));
    auto feed = [&](const char* d, std::size_t n, std::string& o) { json < 0 ? x.feed(d, n, o) : j.feed(d, n, o); };
    std::string buf(chunk, '\0'), out;
    for (;;) {
        ssize_t n = read(0, buf.data(), chunk);
        if (n < 0) return 1;
        if (n == 0) break;
        out.clear();
        feed(buf.data(), static_cast<std::size_t>(n), out);
        std::fwrite(out.data(), 1, out.size(), stdout);
    }
    out.clear();
    json < 0 ? x.finish(out) : j.finish(out);
    std::fwrite(out.data(), 1, out.size(), stdout);
    const RewriteReport& rep = json < 0 ? x.report() : j.report();
    std::fprintf(stderr, "kind=%s raw=%d urls=%zu origin=%s reason=%s\n", caps_doc_kind_name(rep.kind), rep.passed_raw ? 1 : 0,
                 rep.urls_rewritten, rep.first_foreign_origin.c_str(), rep.reason.c_str());
    for (const auto& c : rep.changes) std::fprintf(stderr, "change: %s\n", c.c_str());
    return 0;
}
