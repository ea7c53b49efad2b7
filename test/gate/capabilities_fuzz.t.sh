#!/usr/bin/env bash
# Builds the capabilities rewriter's libFuzzer target (clang, ASan+UBSan) and
# runs it for FUZZ_SECONDS (default 30) from MapServer's own capabilities:
# no crash, output independent of chunking, identity when there is nothing to do.
root=$(cd "$(dirname "$0")/../.." && pwd)
. "$root/test/lib/tap.sh"
cd "$root" || exit 1
. "$root/test/lib/fuzz.sh"
fuzz_build capabilities "capabilities rewriter"

# Seeds: two bytes of chunking, then a document (the small fixtures whole, the larger ones' heads).
for f in test/gate/fixtures/capabilities/mapserver-*; do
  { printf '\003\021'; head -c 6000 "$f"; } >"$work/corpus/$(basename "$f")"
done
printf '\000\001<WMS_Capabilities xmlns="http://www.opengis.net/wms"><Service><MaxWidth>9</MaxWidth></Service></WMS_Capabilities>' >"$work/corpus/small"
# A WFS 2.0 OperationsMetadata that ends without ImplementsResultPaging (the fixtures' heads stop inside
# theirs): the rewriter inserts it, so the "nothing to do" run must not ask for it (a CI run found this).
printf '\003\021<wfs:WFS_Capabilities xmlns:wfs="http://www.opengis.net/wfs/2.0" xmlns:ows="http://www.opengis.net/ows/1.1" version="2.0.0"><ows:OperationsMetadata><ows:Operation name="GetFeature"><ows:DCP/></ows:Operation></ows:OperationsMetadata></wfs:WFS_Capabilities>' >"$work/corpus/wfs200-no-paging"

fuzz_run capabilities 8192 "the capabilities rewriter: no crash, chunking never changed the output"
tap_exit
