/// Raw HTTP/1.1 requests as the load generator sends them.
enum HTTPRequestBytes {
    static func post(path: String, host: String, body: [UInt8]) -> [UInt8] {
        var out = Array(
            "POST \(path) HTTP/1.1\r\nHost: \(host)\r\nContent-Type: application/json\r\nContent-Length: \(body.count)\r\n\r\n"
                .utf8)
        out.append(contentsOf: body)
        return out
    }

    static func get(path: String, host: String) -> [UInt8] {
        Array("GET \(path) HTTP/1.1\r\nHost: \(host)\r\n\r\n".utf8)
    }
}
