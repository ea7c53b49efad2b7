#include "gate/capabilities_doc.hpp"

#include <cctype>
#include <cstring>

namespace ot::gate {
namespace {

constexpr std::string_view kWms = "http://www.opengis.net/wms";
constexpr std::string_view kWfs = "http://www.opengis.net/wfs";
constexpr std::string_view kWfs2 = "http://www.opengis.net/wfs/2.0";
constexpr std::string_view kOws11 = "http://www.opengis.net/ows/1.1";
constexpr std::string_view kOws = "http://www.opengis.net/ows";
constexpr std::string_view kWmts = "http://www.opengis.net/wmts/1.0";
constexpr std::string_view kWcs = "http://www.opengis.net/wcs";
constexpr std::string_view kXlink = "http://www.w3.org/1999/xlink";
constexpr std::string_view kXsi = "http://www.w3.org/2001/XMLSchema-instance";

struct QName {
    std::string_view uri, local, prefix;
};

QName split(const char* name) {
    std::string_view n(name);
    auto a = n.find(kNsSep);
    if (a == std::string_view::npos) return {{}, n, {}};
    std::string_view rest = n.substr(a + 1);
    auto b = rest.find(kNsSep);
    if (b == std::string_view::npos) return {n.substr(0, a), rest, {}};
    return {n.substr(0, a), rest.substr(0, b), rest.substr(b + 1)};
}

std::string_view attr(const char** atts, std::string_view want) {
    for (int i = 0; atts[i]; i += 2)
        if (want == atts[i]) return atts[i + 1];
    return {};
}

std::string_view trim(std::string_view s) {
    while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
    while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
    return s;
}

const char* val_name(int v) {
    static const char* names[] = {"", "LayerLimit", "MaxWidth", "MaxHeight", "CountDefault", "ImplementsResultPaging", "OnlineResource", "OnlineResource"};
    return names[v];
}

}  // namespace

CapsDocRules::CapsDocRules(CapabilityLimits l, DocSink& sink)
    : limits(std::move(l)), sink_(sink), urls_(limits.rewrite_origins, limits.public_base) {}

void CapsDocRules::classify_root(std::string_view uri, std::string_view local, const char** atts) {
    std::string_view version = attr(atts, "version");
    if (local == "WMT_MS_Capabilities") kind_ = CapsDocKind::Wms111;
    else if (local == "WMS_Capabilities" && uri == kWms) kind_ = CapsDocKind::Wms130;
    else if (local == "WFS_Capabilities" && uri == kWfs2) kind_ = CapsDocKind::Wfs200;
    else if (local == "WFS_Capabilities" && (uri == kWfs || uri.empty()))
        kind_ = version == "1.1.0" ? CapsDocKind::Wfs110 : CapsDocKind::Wfs100;
    else if (local == "Capabilities" && uri == kWmts) kind_ = CapsDocKind::Wmts100;
    else if ((local == "WCS_Capabilities" || local == "Capabilities") && uri.substr(0, kWcs.size()) == kWcs)
        kind_ = CapsDocKind::Wcs;
    report.kind = kind_;
    if (kind_ != CapsDocKind::Unknown) return;
    const std::string why = "not a capabilities document (root <" + std::string(local) + ">)";
    if (limits.addresses_in_other_xml && urls_.active()) {
        report.reason = why + ": addresses only";
        done_structure();
    } else {
        sink_.stop(why);
    }
}

void CapsDocRules::done_structure() {
    if (limits.full_parse || structural_done_) return;
    structural_done_ = true;
    sink_.structural_done();
}

static long long cap_of(const CapabilityLimits& l, int what) {
    switch (what) {
    case 1: return l.layer_limit;
    case 2: return l.max_width;
    case 3: return l.max_height;
    case 4: return l.count_default;
    default: return 0;
    }
}

void CapsDocRules::on_start(const char* name, const char** atts, int specified, std::uint64_t off, std::uint64_t end) {
    QName q = split(name);
    Frame f;
    f.start_off = off;
    if (value_.what != Val::None) abort_value();  // a value with children is not a value we know
    bool endpoint = false;
    if (frames_.empty()) {
        classify_root(q.uri, q.local, atts);
        if (kind_ == CapsDocKind::Unknown) {
            // Addresses only: the root tag too, every attribute of it (GML's
            // schemaLocation, WFS 2.0's next/previous links).
            if (!structural_done_) return;
            std::string_view tag = sink_.bytes(off, end - off);
            AddressScanner sc(urls_);
            std::string out;
            sc.feed(tag.data(), tag.size(), out, true);
            if (sc.rewritten == 0) return;
            sink_.edit(off, end - off, std::move(out));
            report.urls_rewritten += sc.rewritten;
            if (report.first_foreign_origin.empty()) report.first_foreign_origin = sc.first_origin;
            return;
        }
    } else {
        const Frame& parent = frames_.back();
        const bool top = frames_.size() == 1;
        if (parent.role == Role::Http && (q.local == "Get" || q.local == "Post")) {
            f.role = Role::GetPost;
            endpoint = true;  // OWS xlink:href, WFS 1.0 onlineResource
        } else if (q.local == "HTTP") {
            f.role = Role::Http;
        } else if (q.local == "OnlineResource" && (parent.role == Role::GetPost || parent.role == Role::Service)) {
            endpoint = true;  // WMS, WCS 1.0: the service's and each operation's address
        }
        if (top) {
            if ((kind_ == CapsDocKind::Wms130 && q.local == "Service" && q.uri == kWms) ||
                (kind_ == CapsDocKind::Wms111 && q.local == "Service") ||
                (kind_ == CapsDocKind::Wfs100 && q.local == "Service" && q.uri == kWfs) ||
                (kind_ == CapsDocKind::Wfs110 && q.local == "ServiceIdentification" && q.uri == kOws))
                f.role = Role::Service;
            else if (kind_ == CapsDocKind::Wfs200 && q.local == "OperationsMetadata" && q.uri == kOws11)
                f.role = Role::OpsMeta;
            else if (q.local == "OperationsMetadata" && (q.uri == kOws || q.uri == kOws11))
                f.role = Role::Operations;
            else if (q.local == "Capability")
                f.role = Role::Capability;
        } else if (parent.role == Role::Capability && q.local == "Request") {
            f.role = Role::Request;
        } else if (parent.role == Role::Service && kind_ == CapsDocKind::Wms130 && q.uri == kWms) {
            Val v = q.local == "LayerLimit" ? Val::LayerLimit
                  : q.local == "MaxWidth"   ? Val::MaxWidth
                  : q.local == "MaxHeight"  ? Val::MaxHeight
                                            : Val::None;
            if (v != Val::None) {
                prefix_ = parent.prefix;
                insert_wms_before(v, off);
                (v == Val::LayerLimit ? layer_limit_ : v == Val::MaxWidth ? max_width_ : max_height_) = true;
                if (cap_of(limits, static_cast<int>(v)) > 0) begin_value(v, false, off, end, name);
            }
        } else if (kind_ == CapsDocKind::Wms111 && q.local == "OnlineResource" && parent.role == Role::Service &&
                   !atts[0]) {
            // WMS 1.0.0 (also WMT_MS_Capabilities) states the service's address as text.
            if (urls_.active()) begin_value(Val::EndpointText, false, off, end, name);
        } else if ((kind_ == CapsDocKind::Wfs100 || kind_ == CapsDocKind::Wfs110) && q.uri == kWfs &&
                   (q.local == "MetadataURL" || (q.local == "OnlineResource" && parent.role == Role::Service))) {
            // WFS 1.x states these addresses as element text.
            if (urls_.active())
                begin_value(q.local == "OnlineResource" ? Val::EndpointText : Val::UrlText, false, off, end, name);
        } else if (parent.role == Role::OpsMeta && q.uri == kOws11) {
            std::string_view n = attr(atts, "name");
            if (q.local == "Operation" && n == "GetFeature") f.role = Role::GetFeatureOp;
            else if (q.local == "Constraint" && n == "ImplementsResultPaging") {
                f.role = Role::Constraint, f.constraint = Val::Paging, paging_ = true;
            } else if (q.local == "Constraint" && n == "CountDefault") {
                f.role = Role::Constraint, f.constraint = Val::CountDefault, count_ = true;
            } else if (q.local == "ExtendedCapabilities") {
                prefix_ = parent.prefix;
                insert_constraints(false, off);
            }
        } else if (parent.role == Role::GetFeatureOp && q.uri == kOws11) {
            if (q.local == "Constraint" && attr(atts, "name") == "CountDefault") {
                f.role = Role::Constraint, f.constraint = Val::CountDefault, f.op_level = true, count_op_ = true;
            } else if (q.local == "Metadata") {
                prefix_ = parent.prefix;
                insert_constraints(true, off);
            }
        } else if (parent.role == Role::Constraint && q.local == "DefaultValue" && q.uri == kOws11) {
            if (parent.constraint == Val::Paging || limits.count_default > 0)
                begin_value(parent.constraint, parent.op_level, off, end, name);
        }
    }
    if (f.role != Role::Other) f.prefix = std::string(q.prefix);
    rewrite_attributes(atts, specified, off, end, endpoint);
    frames_.push_back(std::move(f));
}

void CapsDocRules::on_end(const char*, std::uint64_t off, std::uint64_t end) {
    if (frames_.empty()) return;
    Frame f = std::move(frames_.back());
    frames_.pop_back();
    // expat reports the end of an empty-element tag (<x/>) as an event of no bytes.
    const bool empty_element = end == off;
    if (value_.what != Val::None && value_.depth == frames_.size()) end_value(off, empty_element);
    if (empty_element) return;  // <Service/>: nothing inside to add to
    prefix_ = f.prefix;
    switch (f.role) {
    case Role::Service:
        if (kind_ == CapsDocKind::Wms130) insert_wms_before(Val::None, off);
        else if (kind_ == CapsDocKind::Wms111 && limits.max_width > 0 && limits.max_height > 0) {
            sink_.edit(off, 0, "<!-- ogc-gate: GetMap answers at most " + std::to_string(limits.max_width) + "x" +
                                   std::to_string(limits.max_height) +
                                   " pixels (WMS 1.1.1 has no MaxWidth/MaxHeight; WMS 1.3.0 states them) -->");
            report.changes.push_back("comment with the pixel cap");
        } else if ((kind_ == CapsDocKind::Wfs100 || kind_ == CapsDocKind::Wfs110) && limits.count_default > 0) {
            sink_.edit(off, 0, "<!-- ogc-gate: GetFeature returns at most " + std::to_string(limits.count_default) +
                                   " features per request (WFS 2.0 states CountDefault) -->");
            report.changes.push_back("comment with the feature cap");
        }
        break;
    case Role::GetFeatureOp: insert_constraints(true, off); break;
    case Role::OpsMeta:
        insert_constraints(false, off);
        done_structure();
        break;
    case Role::Request:
    case Role::Capability:
    case Role::Operations: done_structure(); break;
    default: break;
    }
}

void CapsDocRules::on_text(std::string_view s) {
    if (value_.what == Val::None) return;
    std::size_t cap = value_.what == Val::UrlText || value_.what == Val::EndpointText ? 8192 : 64;
    if (value_.text.size() + s.size() > cap) return abort_value();
    value_.text.append(s);
}

void CapsDocRules::begin_value(Val what, bool op_level, std::uint64_t off, std::uint64_t end, std::string_view qname) {
    value_.what = what;
    value_.depth = frames_.size();
    value_.op_level = op_level;
    value_.start_off = off;
    value_.text_start = end;
    value_.text.clear();
    // expat's name is "uri<sep>local<sep>prefix": the raw tag name is prefix:local.
    std::string full(qname);
    QName q = split(full.c_str());
    value_.qname = q.prefix.empty() ? std::string(q.local) : std::string(q.prefix) + ":" + std::string(q.local);
    sink_.set_hold(end);
}

void CapsDocRules::abort_value() {
    value_.what = Val::None;
    sink_.release_hold();
}

void CapsDocRules::end_value(std::uint64_t off, bool empty_element) {
    Val what = value_.what;
    value_.what = Val::None;
    sink_.release_hold();
    std::string_view text = trim(value_.text);
    if (what == Val::Paging) {
        bool yes = text.size() == 4 && std::toupper(static_cast<unsigned char>(text[0])) == 'T' &&
                   std::toupper(static_cast<unsigned char>(text[1])) == 'R';
        if (!yes) report.changes.push_back("upstream states ImplementsResultPaging " + std::string(text) + ": kept");
        return;
    }
    if (what == Val::UrlText || what == Val::EndpointText) {
        if (empty_element) return;
        std::string out;
        std::string_view raw = sink_.bytes(value_.text_start, off - value_.text_start);
        const bool changed = what == Val::EndpointText ? urls_.rewrite_endpoint(raw, out, &report.first_foreign_origin)
                                                       : urls_.rewrite(raw, out, &report.first_foreign_origin);
        if (!raw.empty() && changed) {
            sink_.edit(value_.text_start, off - value_.text_start, std::move(out));
            ++report.urls_rewritten;
        }
        return;
    }
    long long cap = cap_of(limits, static_cast<int>(what));
    std::string label = std::string(val_name(static_cast<int>(what))) + (value_.op_level ? " (GetFeature)" : "");
    if (empty_element) {
        sink_.edit(value_.start_off, value_.text_start - value_.start_off,
                   "<" + value_.qname + ">" + std::to_string(cap) + "</" + value_.qname + ">");
        report.changes.push_back(label + " empty -> " + std::to_string(cap));
        return;
    }
    bool number = !text.empty() && text.size() < 19;
    for (char c : text) number = number && std::isdigit(static_cast<unsigned char>(c));
    if (number && std::stoll(std::string(text)) <= cap) return;  // the upstream's own smaller limit stands
    sink_.edit(value_.text_start, off - value_.text_start, std::to_string(cap));
    report.changes.push_back(label + " " + std::string(text) + " -> " + std::to_string(cap));
}

void CapsDocRules::insert_wms_before(Val upto, std::uint64_t off) {
    const Val order[] = {Val::LayerLimit, Val::MaxWidth, Val::MaxHeight};
    bool* seen[] = {&layer_limit_, &max_width_, &max_height_};
    for (int i = 0; i < 3 && order[i] != upto; ++i) {
        long long cap = cap_of(limits, static_cast<int>(order[i]));
        if (*seen[i] || cap <= 0) continue;
        *seen[i] = true;
        std::string q = qualify(val_name(static_cast<int>(order[i])));
        sink_.edit(off, 0, "<" + q + ">" + std::to_string(cap) + "</" + q + ">");
        report.changes.push_back(std::string("inserted ") + val_name(static_cast<int>(order[i])) + " " + std::to_string(cap));
    }
}

void CapsDocRules::insert_constraints(bool op_level, std::uint64_t off) {
    auto constraint = [&](const char* name, const std::string& value) {
        std::string c = qualify("Constraint"), nv = qualify("NoValues"), dv = qualify("DefaultValue");
        sink_.edit(off, 0, "<" + c + " name=\"" + name + "\"><" + nv + "/><" + dv + ">" + value + "</" + dv + "></" + c + ">");
        report.changes.push_back(std::string("inserted ") + name + (op_level ? " (GetFeature) " : " ") + value);
    };
    if (op_level) {
        if (!count_op_ && limits.count_default > 0) constraint("CountDefault", std::to_string(limits.count_default));
        count_op_ = true;
        return;
    }
    if (!paging_ && limits.paging_when_absent) constraint("ImplementsResultPaging", "TRUE");
    if (!count_ && limits.count_default > 0) constraint("CountDefault", std::to_string(limits.count_default));
    paging_ = count_ = true;
}

void CapsDocRules::rewrite_attributes(const char** atts, int specified, std::uint64_t off, std::uint64_t end,
                                      bool endpoint) {
    if (!urls_.active()) return;
    std::uint64_t targets = 0;
    for (int i = 0; i < specified && i < 64; ++i) {
        QName q = split(atts[2 * i]);
        bool t = (q.local == "href" && q.uri == kXlink) || (q.uri.empty() && (q.local == "onlineResource" || q.local == "template")) ||
                 (q.local == "schemaLocation" && q.uri == kXsi);
        if (t) targets |= std::uint64_t{1} << i;
    }
    if (!targets) return;
    std::string_view tag = sink_.bytes(off, end - off);
    if (tag.empty() || !scan_start_tag(tag, raw_attrs_) || raw_attrs_.size() != static_cast<std::size_t>(specified)) return;
    std::string out;
    std::size_t last = 0;
    for (int i = 0; i < specified && i < 64; ++i) {
        if (!(targets & (std::uint64_t{1} << i))) continue;
        const RawAttr& ra = raw_attrs_[i];
        QName q = split(atts[2 * i]);
        std::string_view raw_local = ra.name.substr(ra.name.find(':') == std::string_view::npos ? 0 : ra.name.find(':') + 1);
        if (raw_local != q.local) return;  // expat's order is not the tag's: leave the tag alone
        std::string value;
        std::string_view raw = tag.substr(ra.value_begin, ra.value_end - ra.value_begin);
        bool changed = q.local == "schemaLocation" ? urls_.rewrite_tokens(raw, value, &report.first_foreign_origin)
                       : endpoint && q.local != "template" ? urls_.rewrite_endpoint(raw, value, &report.first_foreign_origin)
                                                   : urls_.rewrite(raw, value, &report.first_foreign_origin);
        if (!changed) continue;
        out.append(tag.substr(last, ra.value_begin - last));
        out += value;
        last = ra.value_end;
        ++report.urls_rewritten;
    }
    if (last == 0) return;
    out.append(tag.substr(last));
    sink_.edit(off, end - off, std::move(out));
}

}  // namespace ot::gate
