# nginx_peer DIR STATIC_PORT PROXY_PORT [LIMIT_PORT WWW]: the peer of the
# one-connection A/B benchmarks (syscalls.sh, latency_ab.sh), one nginx worker
# started with everything under DIR (pid in DIR/nginx.pid, access log in
# DIR/access.log): proxy_pass on PROXY_PORT to the static upstream on
# STATIC_PORT with upstream keep-alive; with LIMIT_PORT, also a limit_req server
# there (root WWW, 1 request a minute, nodelay, 429) and no default access log.
nginx_peer() {
  local dir=$1 static=$2 proxy=$3 limit=${4:-} www=${5:-}
  local off="" zone="" limit_srv=""
  if [ -n "$limit" ]; then
    off="access_log off; "
    zone="
  limit_req_zone \$binary_remote_addr zone=one:1m rate=1r/m;"
    limit_srv="
  server { listen 127.0.0.1:$limit; root $www; access_log $dir/access.log;
           location / { limit_req zone=one nodelay; limit_req_status 429; } }"
  fi
  mkdir -p "$dir/ngx"; chmod 755 "$dir"
  cat >"$dir/nginx.conf" <<CONF
worker_processes 1; pid $dir/nginx.pid; error_log $dir/nginx.err warn;
events { worker_connections 4096; }
http { ${off}keepalive_requests 1000000; client_body_temp_path $dir/ngx/body; proxy_temp_path $dir/ngx/proxy;
  fastcgi_temp_path $dir/ngx/fcgi; uwsgi_temp_path $dir/ngx/uwsgi; scgi_temp_path $dir/ngx/scgi;$zone
  upstream static { server 127.0.0.1:$static; keepalive 64; }$limit_srv
  server { listen 127.0.0.1:$proxy; access_log $dir/access.log;
           location / { proxy_pass http://static; proxy_http_version 1.1; proxy_set_header Connection ""; } } }
CONF
  nginx -c "$dir/nginx.conf" -p "$dir"
}
