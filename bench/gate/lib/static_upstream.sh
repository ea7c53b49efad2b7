# static_upstream DIR PORT: nginx (one worker, no log) serving a 20 kB body at
# /tile.png from DIR/www, the upstream of the A/B benchmarks; pid in DIR/nginx.pid.
# The request the A/B benchmarks send: priced, not coalesced, with a GetMap's parameters.
AB_QUERY="/tile.png?service=WMS&version=1.3.0&request=GetCapabilities&layers=roads,rivers&styles=&crs=EPSG%3A4326&bbox=45.1%2C5.2%2C46.3%2C7.4&width=256&height=256&format=image%2Fpng&transparent=true"
static_upstream() {
  local dir=$1 port=$2
  mkdir -p "$dir/www" "$dir/ngx"; chmod 755 "$dir" "$dir/www"
  head -c 20480 /dev/urandom >"$dir/www/tile.png"; chmod 644 "$dir/www/tile.png"
  cat >"$dir/nginx.conf" <<CONF
worker_processes 1; pid $dir/nginx.pid; error_log $dir/nginx.err warn;
events { worker_connections 4096; }
http { access_log off; keepalive_requests 1000000; client_body_temp_path $dir/ngx/body; proxy_temp_path $dir/ngx/proxy;
  fastcgi_temp_path $dir/ngx/fcgi; uwsgi_temp_path $dir/ngx/uwsgi; scgi_temp_path $dir/ngx/scgi;
  server { listen 127.0.0.1:$port; root $dir/www; } }
CONF
  nginx -c "$dir/nginx.conf" -p "$dir"
}
