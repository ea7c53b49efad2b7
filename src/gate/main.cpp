// ogc-gate: command line, config (re)loading and signals.
#include <boost/asio/io_context.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/program_options.hpp>
#include <csignal>
#include <iostream>
#include <random>
#include <cstdio>
#include <thread>
#include <vector>

#include "gate/config.hpp"
#include "gate/identity.hpp"
#include "gate/server.hpp"
#include "gate/text.hpp"

namespace po = boost::program_options;
using namespace ot::gate;

namespace {

// One per process, so that a reload without identity.hash_secret keeps the
// address hashes (and so the buckets) of the running process.
const std::string& process_secret() {
    static const std::string s = [] {
        std::random_device rd;
        std::string out;
        char buf[9];
        for (int i = 0; i < 4; ++i) {
            std::snprintf(buf, sizeof buf, "%08x", static_cast<unsigned>(rd()));
            out += buf;
        }
        return out;
    }();
    return s;
}

// Flags given on the command line win over the config file, on every reload.
struct Overrides {
    po::variables_map vm;
    Config apply(Config c) const {
        auto has = [&](const char* k) { return vm.count(k) && !vm[k].defaulted(); };
        if (has("listen")) c.listen = vm["listen"].as<std::string>();
        if (has("upstream")) c.upstream = vm["upstream"].as<std::string>();
        if (has("admin-listen")) c.admin_listen = vm["admin-listen"].as<std::string>();
        if (has("threads")) c.threads = vm["threads"].as<int>();
        if (has("max-pixels")) c.caps.max_pixels = vm["max-pixels"].as<long long>();
        if (has("max-side")) c.caps.max_side = vm["max-side"].as<long long>();
        if (has("max-features")) c.caps.max_features = vm["max-features"].as<long long>();
        if (has("clamp-features")) c.caps.clamp_features = true;
        if (has("public-url")) c.capabilities.public_url = vm["public-url"].as<std::string>();
        if (has("shadow")) c.shadow = true;
        if (has("exception-status")) c.exception_status = vm["exception-status"].as<int>();
        if (has("trusted-proxy")) {
            c.trusted_proxies.clear();
            for (const auto& s : vm["trusted-proxy"].as<std::vector<std::string>>()) {
                auto cidr = parse_cidr(s);
                if (!cidr) throw std::runtime_error("--trusted-proxy: not an address or CIDR block: " + s);
                c.trusted_proxies.push_back(*cidr);
            }
        }
        for (Tier& t : c.tiers) {
            if (t.name != c.default_tier) continue;
            if (has("rate")) t.budget.rate = vm["rate"].as<double>();
            if (has("burst")) t.budget.capacity = vm["burst"].as<double>();
        }
        const std::string p = config_problem(c);
        if (!p.empty()) throw std::runtime_error(p);
        return c;
    }
    Config build() const {
        Config c;
        if (vm.count("config")) c = load_config_file(vm["config"].as<std::string>(), c);
        if (c.hash_secret.empty()) c.hash_secret = process_secret();
        return apply(c);
    }
};

}  // namespace

int main(int argc, char** argv) {
    po::options_description opts(
        "ogc-gate: an OGC-aware edge in front of GeoServer/MapServer.\n"
        "Caps pixels and features, prices requests with the shared cost model and\n"
        "refuses over-budget clients in their own protocol (WMS/WFS/WMTS/WCS/OGC API).\n\n"
        "Usage: ogc-gate --upstream http://127.0.0.1:8080 --listen 127.0.0.1:8000 [options]\n\n"
        "Options (flags win over the config file)",
        100, 44);
    // clang-format off
    opts.add_options()
        ("help,h", "show this help and exit")
        ("config,c", po::value<std::string>(), "YAML config file (tiers, cost weights, caps, trusted proxies); see doc/gate.md")
        ("check-config", "validate the configuration and exit (0 = valid)")
        ("listen", po::value<std::string>()->default_value("127.0.0.1:8000"), "public address HOST:PORT")
        ("upstream", po::value<std::string>()->default_value("http://127.0.0.1:8080"), "map server URL, http://HOST:PORT[/prefix]")
        ("admin-listen", po::value<std::string>()->default_value("127.0.0.1:8001"), "admin address for /metrics and /buckets, or 'off'")
        ("max-pixels", po::value<long long>(), "largest WIDTH x HEIGHT for GetMap/GetFeatureInfo (default 16777216)")
        ("max-side", po::value<long long>(), "largest WIDTH or HEIGHT (default: no per-side limit)")
        ("max-features", po::value<long long>(), "largest WFS COUNT/MAXFEATURES and OGC API limit (default 1000)")
        ("clamp-features", "clamp a WFS count over the cap instead of refusing it")
        ("rate", po::value<double>(), "default tier refill, cost units per second (default 100)")
        ("burst", po::value<double>(), "default tier capacity, cost units (default 1000)")
        ("trusted-proxy", po::value<std::vector<std::string>>()->multitoken(), "proxy address or CIDR whose X-Forwarded-For is believed (repeatable)")
        ("public-url", po::value<std::string>(), "the gate's public URL, advertised in capabilities (default: from Host and trusted proxies' X-Forwarded-Host/-Proto)")
        ("shadow", "decide, log and count, but never refuse")
        ("exception-status", po::value<int>(), "HTTP status of WMS/WFS/WCS XML cap refusals: 200 (default, GDAL shows the text) or 400; WMTS always 400")
        ("threads", po::value<int>(), "I/O threads (default: one per core)")
        ("drain-timeout", po::value<double>()->default_value(10.0), "seconds to finish in-flight requests on SIGTERM")
        ("hash-key", po::value<std::string>(), "print the identity hash of a credential header value (for tiers[].keys) and exit");
    // clang-format on
    Overrides ov;
    try {
        po::store(po::parse_command_line(argc, argv, opts), ov.vm);
        po::notify(ov.vm);
    } catch (const std::exception& e) {
        std::cerr << "ogc-gate: " << e.what() << "\n(see --help)\n";
        return 2;
    }
    if (ov.vm.count("help")) {
        std::cout << opts << "\nSignals: SIGHUP reloads the config file, SIGTERM drains and exits.\n";
        return 0;
    }
    if (ov.vm.count("hash-key")) {
        // Trimmed like the header values it must match.
        // A value with a blank is an Authorization header ("Bearer abc"): its
        // scheme is compared in lower case, as identify() does.
        const std::string v(trim(ov.vm["hash-key"].as<std::string>()));
        std::cout << hash_secret(credential(v.find(' ') != std::string::npos ? "Authorization" : "X-Api-Key", v)) << "\n";
        return 0;
    }
    std::shared_ptr<const Config> cfg;
    try {
        cfg = std::make_shared<const Config>(ov.build());
        parse_upstream(cfg->upstream);
        parse_listen(cfg->listen);
        if (cfg->admin_listen != "off") parse_listen(cfg->admin_listen);
    } catch (const std::exception& e) {
        std::cerr << "ogc-gate: invalid configuration: " << e.what() << "\n";
        return 1;
    }
    if (ov.vm.count("check-config")) {
        std::cout << "configuration OK\n";
        if (cfg->buckets.store == StoreConfig::Kind::Redis)
            std::cout << "note: buckets.store (local or redis) is read at start only; a reload applies the rest of buckets "
                         "(url, timeout_ms, key_prefix, refusal_cache, on_error, classes)\n";
        return 0;
    }

    // A log reader that goes away (a closed pipe) must not take the gate
    // with it: writes then fail with EPIPE and requests are still served.
    std::signal(SIGPIPE, SIG_IGN);
    const int threads = cfg->threads > 0 ? cfg->threads : std::max(1u, std::thread::hardware_concurrency());
    boost::asio::io_context ioc(1);
    Gate gate(ioc, cfg);
    try {
        gate.start(threads);
    } catch (const std::exception& e) {
        std::cerr << "ogc-gate: cannot listen: " << e.what() << "\n";
        return 1;
    }
    std::cerr << "ogc-gate: listening on " << cfg->listen << " (admin " << cfg->admin_listen << "), upstream "
              << cfg->upstream << (cfg->shadow ? ", shadow mode" : "") << "\n";

    std::shared_ptr<const Config> running = cfg;  // what the last reload applied
    boost::asio::signal_set signals(ioc, SIGHUP, SIGTERM, SIGINT);
    std::function<void()> wait_signal = [&]() {
        signals.async_wait([&](const boost::system::error_code& ec, int sig) {
            if (ec) return;
            if (sig == SIGHUP) {
                try {
                    auto next = std::make_shared<const Config>(ov.build());
                    if (next->listen != cfg->listen || next->upstream != cfg->upstream || next->admin_listen != cfg->admin_listen)
                        std::cerr << "ogc-gate: listen/upstream changes need a restart; kept the old ones\n";
                    Config merged = *next;
                    // Where the buckets live (in-process or Redis) stays; a
                    // Redis store's url, timeout, prefix and cache move over
                    // on each I/O thread (Gate::reload).
                    const StoreConfig& was = running->buckets;
                    if (next->buckets.store != was.store) {
                        std::cerr << "ogc-gate: a buckets.store change (local/redis) needs a restart; kept the running "
                                     "store\n";
                        merged.buckets = was;
                        merged.buckets.on_error = next->buckets.on_error;
                        merged.buckets.class_on_error = next->buckets.class_on_error;
                    } else if (was.store == StoreConfig::Kind::Redis &&
                               (next->buckets.url != was.url || next->buckets.timeout_ms != was.timeout_ms ||
                                next->buckets.key_prefix != was.key_prefix ||
                                next->buckets.refusal_cache != was.refusal_cache)) {
                        std::cerr << "ogc-gate: buckets store moved to the reloaded url/timeout_ms/key_prefix/"
                                     "refusal_cache\n";
                    }
                    merged.listen = cfg->listen;
                    merged.upstream = cfg->upstream;
                    merged.admin_listen = cfg->admin_listen;
                    running = std::make_shared<const Config>(merged);
                    gate.reload(running);
                    std::cerr << "ogc-gate: configuration reloaded\n";
                } catch (const std::exception& e) {
                    std::cerr << "ogc-gate: reload failed, keeping the running configuration: " << e.what() << "\n";
                }
                wait_signal();
                return;
            }
            std::cerr << "ogc-gate: draining\n";
            gate.drain_and_stop(ov.vm["drain-timeout"].as<double>());
        });
    };
    wait_signal();

    ioc.run();
    gate.join();
    std::cerr << "ogc-gate: stopped\n";
    return 0;
}
