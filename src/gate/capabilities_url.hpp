// The address half of the capabilities rewrite: which URLs name the map
// server, what they become, and where an attribute's value sits in the raw
// bytes of a start tag (so that everything else in the tag is kept as sent).
#pragma once
#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace ot::gate {

// "scheme://host:port" in lower case with the default port spelled out, or
// empty when `url` does not start with an http(s) origin. `authority_end` is
// where the path (or query, or fragment) starts in `url`.
std::string url_origin(std::string_view url, std::size_t* authority_end = nullptr);

class UrlRewriter {
public:
    UrlRewriter() = default;
    UrlRewriter(const std::vector<std::string>& origins, std::string_view public_base);
    bool active() const { return !base_.empty(); }  // origins may be learnt from endpoints
    // Raw (XML-escaped) attribute or text value in, raw value out. True when
    // the value started with one of the origins; `matched` gets that origin.
    bool rewrite(std::string_view raw, std::string& out, std::string* matched) const;
    // An operation's endpoint (DCP Get/Post, the service's OnlineResource):
    // whatever origin it names, unless it is already the public base's, is
    // the map server advertising itself; that origin is replaced and learnt
    // (add_origin), so that the rest of the document's URLs to it follow.
    bool rewrite_endpoint(std::string_view raw, std::string& out, std::string* matched);
    void add_origin(const std::string& normalised);
    // The same for each whitespace-separated token (xsi:schemaLocation).
    bool rewrite_tokens(std::string_view raw, std::string& out, std::string* matched) const;

    // Whether `origin` (normalised) is one to rewrite, and the escaped base.
    bool matches(const std::string& origin) const;
    // The same test without building a string: "http"/"https" and a raw
    // authority ("user@Host:port") as they appear in the bytes.
    bool match(std::string_view scheme, std::string_view authority) const;
    // The scan's fast path: the length of the origin's usual spelling
    // ("host:port", or "host" for a default port) that `rest` starts with, 0 if none.
    std::size_t exact_prefix(bool https, std::string_view rest) const;
    const std::string& escaped_base() const { return base_; }
    // The base as a JSON string's content (quotes and backslashes escaped).
    const std::string& json_base() const { return json_base_; }

private:
    std::vector<std::string> origins_;  // normalised
    struct Parsed {
        bool https;
        std::string host, port;  // lower case; port spelled out
        std::string exact;       // "host:port" as a URL usually spells it
        bool default_port;       // then "host" alone too
    };
    std::vector<Parsed> parsed_;
    std::string base_;                  // escaped for XML, no trailing '/'
    std::string json_base_;             // escaped for a JSON string
    std::string base_origin_;           // normalised origin of the public base
};

// Rewrites the upstream's origins wherever they appear in a byte stream
// (attribute values, text, comments alike), without parsing: the rest of a
// document once its structural edits are done, or a whole JSON answer. A URL
// split across chunks is held back until its authority is complete.
// Json: also finds JSON's escaped form "http:\/\/host" (the authority then ends
// at the backslash) and writes the base escaped for a JSON string.
class AddressScanner {
public:
    enum class Syntax { Xml, Json };
    explicit AddressScanner(const UrlRewriter& urls, Syntax syntax = Syntax::Xml) : urls_(urls), json_(syntax == Syntax::Json) {}
    void feed(const char* data, std::size_t n, std::string& out, bool final);
    std::size_t rewritten = 0;
    std::string first_origin;

private:
    void scan(std::string_view buf, std::string& out, bool final);
    const UrlRewriter& urls_;
    bool json_;
    std::string carry_;
};

// Where the next "://" (or, json, ":\/\/") starts in `buf` at or after `from`;
// npos when none. `sep_len` gets 3 or 5. A separator cut by the end of `buf`
// is not found (the caller holds back the last bytes).
std::size_t find_scheme_separator(std::string_view buf, std::size_t from, bool json, std::size_t* sep_len);

// One attribute of a raw start tag: its qualified name and where its value
// (between the quotes) lies in the tag.
struct RawAttr {
    std::string_view name;
    std::size_t value_begin = 0, value_end = 0;
};
// Attributes of a well-formed start tag ("<name a='1' b=\"2\"/>"), xmlns
// declarations left out; false when the bytes do not look like one.
bool scan_start_tag(std::string_view tag, std::vector<RawAttr>& attrs);

}  // namespace ot::gate
