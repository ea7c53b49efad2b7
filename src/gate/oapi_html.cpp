#include "gate/oapi_html.hpp"

namespace ot::gate {

OapiHtmlRewriter::OapiHtmlRewriter(const CapabilityLimits& limits)
    : urls_(limits.rewrite_origins, limits.public_base), scan_(urls_, AddressScanner::Syntax::Xml) {
    report_.kind = CapsDocKind::OapiHtml;
    if (!urls_.active()) {
        report_.passed_raw = true;
        report_.reason = "no public address";
    }
}

void OapiHtmlRewriter::feed(const char* data, std::size_t n, std::string& out) {
    if (!urls_.active()) {
        out.append(data, n);
        return;
    }
    scan_.feed(data, n, out, false);
}

void OapiHtmlRewriter::finish(std::string& out) {
    if (urls_.active()) scan_.feed(nullptr, 0, out, true);
    report_.urls_rewritten = scan_.rewritten;
    report_.first_foreign_origin = scan_.first_origin;
}

}  // namespace ot::gate
