// The capabilities rewrite against pass-through, in one run: make build/gate/capabilities_bench.
// A generated WMS 1.3.0 document of ~SIZE_MB (default 10) MB, many layers, each
// with addresses of the map server, moves in 16 kB chunks through:
//   copy      memcpy of each chunk into an output buffer (the floor of any relay)
//   relay     read from one socketpair, write to another, a thread at each
//             end: the syscalls of the gate's relay (upstream socket -> client socket)
//   relay+rw  the same relay with the rewriter between the read and the write
//   parse     expat alone, no handlers (the floor of any parsing rewriter)
//   rewrite   the rewriter alone
// Rounds alternate; medians of MB/s are printed with the ratios, and the peak
// RSS growth while rewriting (the document itself is resident before).
#include <expat.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "gate/capabilities.hpp"

using namespace ot::gate;
using Clock = std::chrono::steady_clock;

namespace {

constexpr std::size_t kChunk = 16384;

std::string make_doc(std::size_t bytes) {
    std::string d = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
                    "<WMS_Capabilities version=\"1.3.0\" xmlns=\"http://www.opengis.net/wms\" "
                    "xmlns:xlink=\"http://www.w3.org/1999/xlink\">\n<Service><Name>WMS</Name><Title>bench</Title>"
                    "<OnlineResource xlink:href=\"http://upstream.internal:8080/?\"/><MaxWidth>8192</MaxWidth>"
                    "<MaxHeight>8192</MaxHeight></Service>\n<Capability><Layer><Title>root</Title>\n";
    for (int i = 0; d.size() < bytes; ++i) {
        std::string n = std::to_string(i);
        d += "  <Layer queryable=\"1\"><Name>layer_" + n + "</Name><Title>Layer number " + n +
             "</Title><Abstract>A generated layer for the capabilities benchmark &amp; its addresses.</Abstract>\n"
             "    <CRS>EPSG:4326</CRS><CRS>EPSG:3857</CRS>\n"
             "    <EX_GeographicBoundingBox><westBoundLongitude>-10</westBoundLongitude><eastBoundLongitude>30"
             "</eastBoundLongitude><southBoundLatitude>35</southBoundLatitude><northBoundLatitude>45"
             "</northBoundLatitude></EX_GeographicBoundingBox>\n"
             "    <BoundingBox CRS=\"EPSG:4326\" minx=\"35\" miny=\"-10\" maxx=\"45\" maxy=\"30\"/>\n"
             "    <MetadataURL type=\"ISO19115:2003\"><Format>text/xml</Format><OnlineResource xlink:type=\"simple\" "
             "xlink:href=\"http://upstream.internal:8080/?request=GetMetadata&amp;layer=layer_" + n + "\"/></MetadataURL>\n"
             "    <Style><Name>default</Name><Title>default</Title><LegendURL width=\"20\" height=\"20\">"
             "<Format>image/png</Format><OnlineResource xlink:type=\"simple\" xlink:href=\"http://upstream.internal:8080/"
             "?SERVICE=WMS&amp;VERSION=1.3.0&amp;REQUEST=GetLegendGraphic&amp;LAYER=layer_" + n +
             "&amp;FORMAT=image/png\"/></LegendURL></Style>\n  </Layer>\n";
    }
    d += "</Layer></Capability></WMS_Capabilities>\n";
    return d;
}

CapabilityLimits limits() {
    CapabilityLimits l;
    l.max_width = l.max_height = 4096;
    l.count_default = 1000;
    l.public_base = "https://maps.example.org";
    l.rewrite_origins = {"http://upstream.internal:8080"};
    return l;
}

long max_rss_kb() {
    rusage ru{};
    getrusage(RUSAGE_SELF, &ru);
    return ru.ru_maxrss;
}

double seconds(const std::function<void()>& f) {
    auto t0 = Clock::now();
    f();
    return std::chrono::duration<double>(Clock::now() - t0).count();
}

std::size_t sink_out;  // keeps the optimiser from dropping the work

void copy_pass(const std::string& doc) {
    std::string out;
    out.reserve(kChunk * 2);
    for (std::size_t i = 0; i < doc.size(); i += kChunk) {
        out.clear();
        out.append(doc, i, std::min(kChunk, doc.size() - i));
        sink_out += out.size();
    }
}

void rewrite_pass(const std::string& doc) {
    CapabilitiesRewriter r(limits());
    std::string out;
    for (std::size_t i = 0; i < doc.size(); i += kChunk) {
        out.clear();
        r.feed(doc.data() + i, std::min(kChunk, doc.size() - i), out);
        sink_out += out.size();
    }
    out.clear();
    r.finish(out);
    sink_out += out.size();
    if (r.report().passed_raw) std::fprintf(stderr, "rewriter gave up: %s\n", r.report().reason.c_str());
}

void parse_pass(const std::string& doc) {
    XML_Parser p = XML_ParserCreateNS(nullptr, '\x1F');
    for (std::size_t i = 0; i < doc.size(); i += kChunk)
        XML_Parse(p, doc.data() + i, static_cast<int>(std::min(kChunk, doc.size() - i)), XML_FALSE);
    XML_Parse(p, nullptr, 0, XML_TRUE);
    XML_ParserFree(p);
}

// upstream thread -> [a] -> relay (this thread, optionally rewriting) -> [b] -> client thread
void relay_pass(const std::string& doc, bool rewrite) {
    int a[2], b[2];
    if (socketpair(AF_UNIX, SOCK_STREAM, 0, a) || socketpair(AF_UNIX, SOCK_STREAM, 0, b)) std::abort();
    std::thread up([&] {
        for (std::size_t i = 0; i < doc.size();) {
            ssize_t n = write(a[0], doc.data() + i, std::min(kChunk, doc.size() - i));
            if (n <= 0) break;
            i += static_cast<std::size_t>(n);
        }
        shutdown(a[0], SHUT_WR);
    });
    std::thread client([&] {
        std::vector<char> buf(kChunk * 4);
        while (read(b[1], buf.data(), buf.size()) > 0) {
        }
    });
    CapabilitiesRewriter r(limits());
    std::vector<char> buf(kChunk);
    std::string out;
    auto send = [&](const char* p, std::size_t n) {
        while (n > 0) {
            ssize_t w = write(b[0], p, n);
            if (w <= 0) std::abort();
            p += w, n -= static_cast<std::size_t>(w);
        }
    };
    for (;;) {
        ssize_t n = read(a[1], buf.data(), buf.size());
        if (n <= 0) break;
        if (!rewrite) {
            send(buf.data(), static_cast<std::size_t>(n));
            continue;
        }
        out.clear();
        r.feed(buf.data(), static_cast<std::size_t>(n), out);
        send(out.data(), out.size());
    }
    if (rewrite) {
        out.clear();
        r.finish(out);
        send(out.data(), out.size());
    }
    shutdown(b[0], SHUT_WR);
    up.join();
    client.join();
    for (int fd : {a[0], a[1], b[0], b[1]}) close(fd);
}

double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
}

}  // namespace

int main() {
    const double mb = std::getenv("SIZE_MB") ? std::atof(std::getenv("SIZE_MB")) : 10;
    const int rounds = std::getenv("ROUNDS") ? std::atoi(std::getenv("ROUNDS")) : 7;
    // ONE_PASS=FILE: one rewrite of FILE (e.g. bench/gate/capabilities_gate.sh's
    // document, DOC_OUT there) and nothing else, for callgrind (no threads, no timing):
    //   ONE_PASS=caps.xml valgrind --tool=callgrind --toggle-collect='ot::gate::CapabilitiesRewriter::*' build/gate/capabilities_bench
    if (const char* f = std::getenv("ONE_PASS")) {
        std::string doc;
        if (FILE* in = std::fopen(f, "rb")) {
            char b[65536];
            for (std::size_t n; (n = std::fread(b, 1, sizeof b, in)) > 0;) doc.append(b, n);
            std::fclose(in);
        }
        CapabilityLimits l = limits();
        if (const char* o = std::getenv("ORIGIN")) l.rewrite_origins.push_back(o);
        CapabilitiesRewriter r(l);
        std::string out;
        constexpr std::size_t kGateBlock = 65536;  // the gate's relay block
        for (std::size_t i = 0; i < doc.size(); i += kGateBlock) {
            out.clear();
            r.feed(doc.data() + i, std::min(kGateBlock, doc.size() - i), out);
            sink_out += out.size();
        }
        r.finish(out);
        std::printf("one rewrite pass of %zu bytes: %s, %zu URLs%s%s\n", doc.size(), caps_doc_kind_name(r.report().kind),
                    r.report().urls_rewritten, r.report().passed_raw ? ", gave up: " : "", r.report().reason.c_str());
        return 0;
    }
    const std::string doc = make_doc(static_cast<std::size_t>(mb * 1024 * 1024));
    {  // a correctness glance: the document is one the rewriter rewrites
        RewriteReport rep;
        std::string out = rewrite_capabilities(doc.substr(0, 1 << 16) + "</Layer></Capability></WMS_Capabilities>", limits(), &rep);
        std::printf("document: %.1f MB, %d rounds, %zu-byte chunks; sample rewrite: %s, %zu URLs, %zu changes\n",
                    doc.size() / 1048576.0, rounds, kChunk, caps_doc_kind_name(rep.kind), rep.urls_rewritten, rep.changes.size());
    }
    const char* names[] = {"copy", "relay", "relay+rw", "parse", "rewrite"};
    std::vector<std::function<void()>> runs = {[&] { copy_pass(doc); }, [&] { relay_pass(doc, false); },
                                               [&] { relay_pass(doc, true); }, [&] { parse_pass(doc); },
                                               [&] { rewrite_pass(doc); }};
    // Warm up everything but the rewriter, then take the high-water mark: what
    // the rewriter adds to it is its own memory.
    for (int i = 0; i < 4; ++i) runs[i]();
    const long rss_before = max_rss_kb();
    std::vector<std::vector<double>> mbps(runs.size());
    for (int r = 0; r < rounds; ++r)
        for (std::size_t i = 0; i < runs.size(); ++i) mbps[i].push_back(doc.size() / 1048576.0 / seconds(runs[i]));
    const long rss_after = max_rss_kb();
    std::vector<double> med(runs.size());
    for (std::size_t i = 0; i < runs.size(); ++i) {
        med[i] = median(mbps[i]);
        std::printf("%-9s median %8.1f MB/s  (min %.1f, max %.1f)\n", names[i], med[i],
                    *std::min_element(mbps[i].begin(), mbps[i].end()), *std::max_element(mbps[i].begin(), mbps[i].end()));
    }
    std::printf("ratio relay+rw / relay  = %.2f   (target >= 0.8: the gate's relay with the rewrite against without)\n", med[2] / med[1]);
    std::printf("ratio rewrite / copy    = %.3f  (against a bare memcpy)\n", med[4] / med[0]);
    std::printf("ratio rewrite / parse   = %.2f   (against expat alone: the cost of the edits and offsets)\n", med[4] / med[3]);
    std::printf("peak RSS growth while rewriting: %.2f MB (target < 16 MB; document resident before: %.1f MB)\n",
                (rss_after - rss_before) / 1024.0, doc.size() / 1048576.0);
    return sink_out == 0;
}
