#include "gate/oapi_json.hpp"

#include <algorithm>
#include <nlohmann/json.hpp>

#include "gate/capabilities_url.hpp"

namespace ot::gate {
namespace {

using ojson = nlohmann::ordered_json;  // keeps the document's key order

bool json_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

// Where an OpenAPI document declares `limit` and what it becomes there.
struct LimitCapper {
    std::int64_t cap;
    RewriteReport& rep;
    bool changed = false;

    void note(const std::string& where, const std::string& what) {
        rep.changes.push_back(where + ": " + what);
        changed = true;
    }

    static bool is_limit(const ojson& p) {
        if (!p.is_object()) return false;
        auto n = p.find("name"), in = p.find("in");
        if (n == p.end() || !n->is_string() || n->get<std::string>() != "limit") return false;
        return in == p.end() || (in->is_string() && in->get<std::string>() == "query");
    }

    void cap_param(ojson& p, const std::string& where) {
        if (!is_limit(p)) return;
        ojson* s = nullptr;
        if (auto it = p.find("schema"); it != p.end() && it->is_object()) s = &*it;
        else if (p.contains("type")) s = &p;  // Swagger 2: the schema's keywords sit on the parameter
        else {
            p["schema"] = ojson{{"type", "integer"}, {"minimum", 1}};
            s = &p["schema"];
        }
        ojson& sc = *s;
        auto m = sc.find("maximum");
        if (m == sc.end() || !m->is_number() || m->get<double>() > static_cast<double>(cap)) {
            note(where, "limit maximum " + (m == sc.end() ? std::string("(none)") : m->dump()) + " -> " + std::to_string(cap));
            sc["maximum"] = cap;
        }
        // OpenAPI 3.1's numeric exclusiveMaximum above the cap would still allow more.
        if (auto x = sc.find("exclusiveMaximum"); x != sc.end() && x->is_number() && x->get<double>() > static_cast<double>(cap)) {
            note(where, "limit exclusiveMaximum " + x->dump() + " removed");
            sc.erase(x);
        }
        if (auto d = sc.find("default"); d != sc.end() && d->is_number() && d->get<double>() > static_cast<double>(cap)) {
            note(where, "limit default " + d->dump() + " -> " + std::to_string(cap));
            *d = cap;
        }
    }

    // An operation's or a path's parameter list: inline limits capped, a $ref
    // to another document's limit (OGC's shared ogcapi-features-1.yaml) made
    // inline so that it can state the gate's maximum. Local refs point into
    // components/parameters, capped there.
    void cap_list(ojson& list, const std::string& where) {
        if (!list.is_array()) return;
        for (ojson& p : list) {
            if (!p.is_object()) continue;
            auto r = p.find("$ref");
            if (r != p.end() && r->is_string()) {
                const std::string ref = r->get<std::string>();
                const std::string tail = "/parameters/limit";
                if (ref.rfind("#", 0) != 0 && ref.size() >= tail.size() &&
                    ref.compare(ref.size() - tail.size(), tail.size(), tail) == 0) {
                    p = ojson{{"name", "limit"}, {"in", "query"}, {"required", false}, {"style", "form"},
                              {"explode", false},
                              {"schema", ojson{{"type", "integer"}, {"minimum", 1}, {"maximum", cap},
                                               {"default", std::min<std::int64_t>(10, cap)}}}};
                    note(where, "limit $ref " + ref + " inlined with maximum " + std::to_string(cap));
                }
                continue;
            }
            cap_param(p, where);
        }
    }

    void run(ojson& doc) {
        if (auto c = doc.find("components"); c != doc.end() && c->is_object())
            if (auto ps = c->find("parameters"); ps != c->end() && ps->is_object())
                for (auto& [k, v] : ps->items()) cap_param(v, "components/parameters/" + k);
        if (auto ps = doc.find("parameters"); ps != doc.end() && ps->is_object())  // Swagger 2
            for (auto& [k, v] : ps->items()) cap_param(v, "parameters/" + k);
        auto paths = doc.find("paths");
        if (paths == doc.end() || !paths->is_object()) return;
        static const char* const kMethods[] = {"get", "put", "post", "delete", "options", "head", "patch", "trace"};
        for (auto& [path, item] : paths->items()) {
            if (!item.is_object()) continue;
            if (auto ps = item.find("parameters"); ps != item.end()) cap_list(*ps, "paths " + path);
            for (const char* m : kMethods)
                if (auto op = item.find(m); op != item.end() && op->is_object())
                    if (auto ps = op->find("parameters"); ps != op->end()) cap_list(*ps, std::string(m) + " " + path);
        }
    }
};

bool is_openapi(const ojson& doc) {
    return doc.is_object() && (doc.contains("openapi") || doc.contains("swagger")) && doc.contains("paths") &&
           doc["paths"].is_object();
}

}  // namespace

struct OapiRewriter::Impl {
    Impl(CapabilityLimits l, std::size_t limit)
        : limits(std::move(l)), urls(limits.rewrite_origins, limits.public_base),
          scanner(urls, AddressScanner::Syntax::Json), buffer_limit(limit) {
        report.kind = CapsDocKind::OapiJson;
    }

    CapabilityLimits limits;
    UrlRewriter urls;
    AddressScanner scanner;
    RewriteReport report;
    std::size_t buffer_limit;
    std::string buf;        // held: the whole body (buffered), or leading bytes until JSON is told
    bool streaming = false; // decided JSON, addresses only from here
    bool raw = false;

    void give_up(const std::string& why, std::string& out) {
        report.passed_raw = true;
        if (report.reason.empty()) report.reason = why;
        raw = true;
        out += buf;
        std::string().swap(buf);
    }

    void scan(const char* d, std::size_t n, std::string& out, bool final) {
        if (!urls.active()) out.append(d, n);
        else scanner.feed(d, n, out, final);
        report.urls_rewritten = scanner.rewritten;
        if (report.first_foreign_origin.empty()) report.first_foreign_origin = scanner.first_origin;
    }

    // 1: starts like JSON ('{' or '[' after a byte-order mark and blanks), 0: not JSON, -1: not known yet.
    int sniff() const {
        std::size_t i = 0;
        if (buf.size() >= 3 && buf.compare(0, 3, "\xEF\xBB\xBF") == 0) i = 3;
        else if (!buf.empty() && buf.size() < 3 && std::string("\xEF\xBB\xBF").compare(0, buf.size(), buf) == 0) return -1;
        while (i < buf.size() && json_space(buf[i])) ++i;
        if (i == buf.size()) return -1;
        return buf[i] == '{' || buf[i] == '[' ? 1 : 0;
    }

    // From here on, addresses only, whatever the size.
    bool start_streaming(std::string& out, bool final) {
        const int j = sniff();
        if (j == 0) {
            give_up("not JSON", out);
            return false;
        }
        if (j < 0 && !final && buf.size() <= limits.max_pending) return false;  // still blanks: wait
        if (j < 0) {
            give_up("not JSON (empty or blank)", out);
            return false;
        }
        streaming = true;
        std::string held;
        held.swap(buf);
        scan(held.data(), held.size(), out, final);
        return true;
    }

    void feed(const char* d, std::size_t n, std::string& out) {
        if (raw) {
            out.append(d, n);
            return;
        }
        if (streaming) return scan(d, n, out, false);
        buf.append(d, n);
        if (buffer_limit == 0) {
            start_streaming(out, false);
            return;
        }
        if (sniff() == 0) return give_up("not JSON", out);
        if (buf.size() > buffer_limit) {
            report.reason = "larger than " + std::to_string(buffer_limit) + " bytes: addresses only";
            start_streaming(out, false);
        }
    }

    void finish(std::string& out) {
        if (raw) return;
        if (streaming) return scan(nullptr, 0, out, true);
        if (buffer_limit == 0) {
            start_streaming(out, true);
            return;
        }
        ojson doc = ojson::parse(buf, nullptr, /*allow_exceptions=*/false);
        if (doc.is_discarded() || !(doc.is_object() || doc.is_array())) return give_up("not JSON (parse error)", out);
        learn_endpoints(doc);
        std::string body;
        if (is_openapi(doc)) {
            report.kind = CapsDocKind::OpenApi;
            bool changed = rewrite_swagger_host(doc);
            if (limits.count_default > 0) {
                LimitCapper capper{limits.count_default, report};
                capper.run(doc);
                changed |= capper.changed;
            }
            if (changed) {
                try {
                    body = doc.dump();
                } catch (const nlohmann::json::exception&) {  // invalid UTF-8 in a string: leave it be
                    report.changes.clear();
                    body.clear();
                }
            }
        }
        if (body.empty()) body.swap(buf);
        std::string().swap(buf);
        streaming = true;
        scan(body.data(), body.size(), out, true);
    }

    // Swagger 2 names its server in pieces: schemes[0]://host + basePath. A
    // client builds every URL from them, so the address scan (which looks for
    // "scheme://") never sees it. Whatever host it names is the map server (as
    // servers[].url in OpenAPI 3); it becomes the public base's, with the base's
    // path before basePath. True when the document changed.
    bool rewrite_swagger_host(ojson& doc) {
        if (!urls.active() || !doc.contains("swagger")) return false;
        auto host = doc.find("host");
        if (host == doc.end() || !host->is_string()) return false;
        std::string scheme = "http";
        if (auto sc = doc.find("schemes"); sc != doc.end() && sc->is_array() && !sc->empty() && (*sc)[0].is_string())
            scheme = (*sc)[0].get<std::string>();
        const std::string origin = url_origin(scheme + "://" + host->get<std::string>());
        std::size_t auth_end = 0;
        const std::string& base = limits.public_base;
        const std::string base_origin = url_origin(base, &auth_end);
        if (origin.empty() || base_origin.empty() || origin == base_origin) return false;
        urls.add_origin(origin);
        const std::size_t auth_begin = base.find("://") + 3;
        std::string base_path = base.substr(auth_end);
        while (!base_path.empty() && base_path.back() == '/') base_path.pop_back();
        std::string base_path_tail;
        if (auto bp = doc.find("basePath"); bp != doc.end() && bp->is_string()) base_path_tail = bp->get<std::string>();
        if (!base_path_tail.empty() && base_path_tail.front() != '/') base_path_tail.insert(0, "/");
        const std::string new_path = base_path + base_path_tail;
        report.changes.push_back("swagger host " + host->get<std::string>() + " -> " +
                                 base.substr(auth_begin, auth_end - auth_begin));
        *host = base.substr(auth_begin, auth_end - auth_begin);
        doc["schemes"] = ojson::array({base.substr(0, auth_begin - 3)});
        doc["basePath"] = new_path.empty() ? "/" : new_path;
        ++scanner.rewritten;
        if (report.first_foreign_origin.empty()) report.first_foreign_origin = origin;
        return true;
    }

    // The map server's own address, whatever host it names: an OpenAPI
    // document's servers[].url and a landing page's (or any answer's)
    // top-level "self" link. Their origins are rewritten in the rest.
    void learn_endpoints(const ojson& doc) {
        if (!doc.is_object() || !urls.active()) return;
        auto learn = [&](const ojson& v) {
            if (v.is_string()) urls.add_origin(url_origin(v.get<std::string>()));
        };
        if (auto s = doc.find("servers"); s != doc.end() && s->is_array())
            for (const auto& e : *s)
                if (e.is_object() && e.contains("url")) learn(e["url"]);
        if (auto l = doc.find("links"); l != doc.end() && l->is_array())
            for (const auto& e : *l)
                if (e.is_object() && e.value("rel", ojson()).is_string() && e["rel"].get<std::string>() == "self" &&
                    e.contains("href"))
                    learn(e["href"]);
    }
};

OapiRewriter::OapiRewriter(CapabilityLimits limits, std::size_t buffer_limit)
    : impl_(std::make_unique<Impl>(std::move(limits), buffer_limit)) {}
OapiRewriter::~OapiRewriter() = default;
void OapiRewriter::feed(const char* data, std::size_t n, std::string& out) { impl_->feed(data, n, out); }
void OapiRewriter::finish(std::string& out) { impl_->finish(out); }
const RewriteReport& OapiRewriter::report() const { return impl_->report; }

std::string rewrite_oapi(const std::string& body, const CapabilityLimits& limits, std::size_t buffer_limit,
                         RewriteReport* report) {
    OapiRewriter r(limits, buffer_limit);
    std::string out;
    r.feed(body.data(), body.size(), out);
    r.finish(out);
    if (report) *report = r.report();
    return out;
}

}  // namespace ot::gate
