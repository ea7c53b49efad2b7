#include "gate/ogc_error.hpp"

#include <nlohmann/json.hpp>
#include <string_view>

#include "gate/text.hpp"

namespace ot::gate {
namespace {

constexpr const char* kXmlDecl = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";

void attr(std::string& b, const char* name, const std::string& value) {
    if (value.empty()) return;
    b += ' ';
    b += name;
    b += "=\"";
    b += xml_escape(value);
    b += '"';
}

std::string service_exception_report(const char* version, bool namespaced, const std::string& code,
                                     const std::string& locator, const std::string& text) {
    std::string b;
    b.reserve(256 + text.size());
    b += kXmlDecl;
    b += "<ServiceExceptionReport version=\"";
    b += version;
    b += "\"";
    if (namespaced) b += " xmlns=\"http://www.opengis.net/ogc\"";
    b += ">\n  <ServiceException";
    attr(b, "code", code);
    attr(b, "locator", locator);
    b += '>';
    // Element text keeps its quotes: readable where a client prints the raw
    // report (GDAL, for a non-200 answer).
    b += xml_escape_text(text);
    b += "</ServiceException>\n</ServiceExceptionReport>\n";
    return b;
}

// WMS has no generic codes: 1.1.1 and 1.3.0 (Table E.1) each list their
// own, to be used only with their stated meaning, and the attribute is
// optional. The gate speaks OWS codes; a WMS report keeps those with a WMS
// equivalent and omits the rest rather than send one outside the list.
std::string wms_code(const OgcError& e, bool v130) {
    const char* crs = v130 ? "InvalidCRS" : "InvalidSRS";
    if (e.code == "InvalidParameterValue") {
        if (iequals(e.locator, "FORMAT")) return "InvalidFormat";
        if (iequals(e.locator, "CRS") || iequals(e.locator, "SRS")) return crs;
        return {};
    }
    if (e.code == "InvalidCRS" || e.code == "InvalidSRS") return crs;
    static constexpr std::string_view kBoth[] = {
        "InvalidFormat",         "LayerNotDefined",       "StyleNotDefined",       "LayerNotQueryable",
        "InvalidPoint",          "CurrentUpdateSequence", "InvalidUpdateSequence", "MissingDimensionValue",
        "InvalidDimensionValue", "OperationNotSupported"};
    for (std::string_view c : kBoth)
        if (e.code == c) return e.code;
    return {};
}

std::string ows_exception_report(const char* ns, const char* version, const OgcError& e) {
    std::string b;
    b.reserve(320 + e.text.size());
    b += kXmlDecl;
    // The ows: prefix matters: GDAL's WFS driver looks for "<ows:ExceptionReport".
    b += "<ows:ExceptionReport xmlns:ows=\"";
    b += ns;
    b += "\" version=\"";
    b += version;
    b += "\" xml:lang=\"en\">\n  <ows:Exception";
    attr(b, "exceptionCode", e.code.empty() ? std::string("NoApplicableCode") : e.code);
    attr(b, "locator", e.locator);
    b += ">\n    <ows:ExceptionText>";
    b += xml_escape_text(e.text);
    b += "</ows:ExceptionText>\n  </ows:Exception>\n</ows:ExceptionReport>\n";
    return b;
}

int status_for(ErrorKind k, bool xml, int size_status) {
    switch (k) {
        case ErrorKind::BadRequest:
        case ErrorKind::OverCap:
        case ErrorKind::NeverFits: return xml ? size_status : 400;
        case ErrorKind::RateLimited: return 429;
        case ErrorKind::UpstreamDown: return 502;
        case ErrorKind::UpstreamTimeout: return 504;
        case ErrorKind::Busy: return 503;
    }
    return 500;
}

const char* title_for(ErrorKind k) {
    switch (k) {
        case ErrorKind::BadRequest: return "Bad request";
        case ErrorKind::OverCap: return "Request too large";
        case ErrorKind::NeverFits: return "Request larger than the whole budget";
        case ErrorKind::RateLimited: return "Too many requests";
        case ErrorKind::UpstreamDown: return "Upstream unavailable";
        case ErrorKind::UpstreamTimeout: return "Upstream timed out";
        case ErrorKind::Busy: return "Service busy";
    }
    return "Error";
}

Rendered render_uncached(Service service, Dialect dialect, const OgcError& e, int size_status) {
    switch (dialect) {
        case Dialect::Wms111:
            // The 1.1.1 DTD gives ServiceException a code and no locator.
            return {status_for(e.kind, true, size_status), "application/vnd.ogc.se_xml",
                    service_exception_report("1.1.1", false, wms_code(e, false), {}, e.text)};
        case Dialect::Wms130:
            return {status_for(e.kind, true, size_status), "text/xml",
                    service_exception_report("1.3.0", true, wms_code(e, true), e.locator, e.text)};
        case Dialect::Wfs100:
            return {status_for(e.kind, true, size_status), "text/xml",
                    service_exception_report("1.2.0", true, e.code, e.locator, e.text)};
        case Dialect::Wfs110:
            return {status_for(e.kind, true, size_status), "text/xml",
                    ows_exception_report("http://www.opengis.net/ows", "1.0.0", e)};
        case Dialect::Ows11:
            if (service == Service::Wmts) {
                // WMTS clients read non-200 bodies, so WMTS gets the statuses
                // 07-057r7 gives its codes (Tables 21, 24, 27: the gate's
                // InvalidParameterValue and MissingParameterValue are 400),
                // whatever exception_status says. text/xml because GDAL shows
                // the body of a non-200 answer only for a text/* type;
                // MapProxy and GeoWebCache send WMTS reports as text/xml too.
                return {status_for(e.kind, false, size_status), "text/xml",
                        ows_exception_report("http://www.opengis.net/ows/1.1", "1.0.0", e)};
            }
            return {status_for(e.kind, true, size_status), "application/xml",
                    ows_exception_report("http://www.opengis.net/ows/1.1", service == Service::Wfs ? "2.0.0" : "1.0.0", e)};
        case Dialect::OgcApi: {
            const int status = status_for(e.kind, false, size_status);
            nlohmann::json j = {{"type", "about:blank"}, {"title", title_for(e.kind)}, {"status", status}, {"detail", e.text}};
            if (!e.code.empty()) j["code"] = e.code;
            if (!e.locator.empty()) j["parameter"] = e.locator;
            // Client text may be any bytes: invalid UTF-8 is replaced, never thrown.
            return {status, "application/problem+json", j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n"};
        }
        case Dialect::Plain:
            break;
    }
    return {status_for(e.kind, false, size_status), "text/plain; charset=utf-8", e.text + "\n"};
}

}  // namespace

Rendered render_error(Service service, Dialect dialect, const OgcError& e, int size_status) {
    // A client over its budget gets the same words refusal after refusal
    // (their numbers move once a second at most): the last document this
    // thread rendered is reused when every input is equal, instead of being
    // escaped and assembled again. Any other input renders afresh.
    struct Last {
        bool set = false;
        Service service{};
        Dialect dialect{};
        int size_status = 0;
        OgcError e{};
        Rendered r{};
    };
    thread_local Last last;
    if (last.set && last.service == service && last.dialect == dialect && last.size_status == size_status &&
        last.e.kind == e.kind && last.e.text == e.text && last.e.code == e.code && last.e.locator == e.locator)
        return last.r;
    Rendered r = render_uncached(service, dialect, e, size_status);
    last.set = false;  // a throw below leaves no half-updated entry
    last.service = service;
    last.dialect = dialect;
    last.size_status = size_status;
    last.e = e;
    last.r = r;
    last.set = true;
    return r;
}

}  // namespace ot::gate
