/// The files a benchmark run writes for the servers it starts: the relay's configuration and the two nginx
/// configurations of the anchor.
enum BenchFiles {
    /// The relay's configuration for a measurement (the benchmark's, push-instructions'). It raises the limits (never
    /// bypasses them): every push still opens its grant and passes the per-phone and per-address limiters. Every
    /// request comes from 127.0.0.1, so the address's limit is the most the configuration allows (a million) per
    /// `addressPeriodSeconds`: the benchmark's second makes a million in ten seconds within the grant run's reach,
    /// and its 429s would leave grant_rps unmeasured. Memory limits unless `storePort` names a Redis (each call
    /// bounded by `storeTimeoutMilliseconds`); APNs through `proxyPort`'s proxy if given; HTTPS with the `tls` pair if
    /// given.
    static func relayConfiguration(
        simulatorPort: Int, caFile: String, storePort: Int?, threads: Int?, proxyPort: Int? = nil,
        storeTimeoutMilliseconds: Int = 100, addressPeriodSeconds: Int = 1,
        tls: (certificate: String, key: String)? = nil
    ) -> String {
        let store =
            storePort.map {
                #"  "limits_store": { "kind": "redis", "url": "redis://127.0.0.1:\#($0)/0", "#
                    + #""timeout_ms": \#(storeTimeoutMilliseconds) },"# + "\n"
            } ?? ""
        let threadsLine = threads.map { "    \"threads\": \($0),\n" } ?? ""
        let proxy = proxyPort.map { "    \"proxy\": \(JSONText.string("http://127.0.0.1:\($0)")),\n" } ?? ""
        let origin = JSONText.string("https://127.0.0.1:\(simulatorPort)")
        let front =
            tls.map {
                #"  "tls": { "certificate_file": \#(JSONText.string($0.certificate)), "#
                    + #""key_file": \#(JSONText.string($0.key)) },"# + "\n"
            } ?? ""
        return """
            {
              "listen": "127.0.0.1:0",
            \(front)              "push_limit": { "requests": 1000000, "period_s": 60 },
              "ip_limit": { "requests": 1000000, "period_s": \(addressPeriodSeconds), "block_s": 10 },
            \(store)  "apns": {
            \(proxy)    "topic": \(JSONText.string(BenchSimulator.topic)),
                "sandbox_origin": \(origin),
                "production_origin": \(origin),
                "ca_file": \(JSONText.string(caFile))
              },
              "server": {
            \(threadsLine)    "max_connections": 16384,
                "max_connections_per_address": 0,
                "connection_timeout_s": 120,
                "shutdown_grace_s": 1
              }
            }

            """
    }

    /// One nginx (one worker, in the foreground, everything under `directory`) serving `body` inside `http`.
    static func nginxConfiguration(name: String, directory: String, body: String) -> String {
        let temp = "\(directory)/\(name)-temp"
        return """
            worker_processes 1;
            daemon off;
            pid \(directory)/\(name).pid;
            error_log \(directory)/\(name).log warn;
            events { worker_connections 4096; }
            http {
                access_log off;
                client_body_temp_path \(temp)/body;
                proxy_temp_path \(temp)/proxy;
                fastcgi_temp_path \(temp)/fastcgi;
                uwsgi_temp_path \(temp)/uwsgi;
                scgi_temp_path \(temp)/scgi;
                keepalive_requests 10000000;
                keepalive_timeout 120s;
            \(body)
            }

            """
    }

    /// The anchor's upstream: nginx over TLS with the simulator's certificate, answering 200 at once.
    static func nginxUpstream(port: Int, certificate: String, key: String) -> String {
        """
            server {
                listen 127.0.0.1:\(port) ssl;
                ssl_certificate \(certificate);
                ssl_certificate_key \(key);
                location / { return 200 '{}'; }
            }
        """
    }

    /// The anchor: nginx proxying HTTP/1.1 with keep-alive to the upstream over TLS, verifying its certificate.
    static func nginxProxy(port: Int, upstreamPort: Int, caFile: String) -> String {
        """
            upstream upstream_tls {
                server 127.0.0.1:\(upstreamPort);
                keepalive 64;
                keepalive_requests 10000000;
                keepalive_timeout 120s;
            }
            server {
                listen 127.0.0.1:\(port);
                client_max_body_size 8k;
                location / {
                    proxy_pass https://upstream_tls;
                    proxy_http_version 1.1;
                    proxy_set_header Connection "";
                    proxy_ssl_session_reuse on;
                    proxy_ssl_verify on;
                    proxy_ssl_name localhost;
                    proxy_ssl_trusted_certificate \(caFile);
                }
            }
        """
    }
}
