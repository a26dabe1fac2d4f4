import Foundation

/// The relay.json files a run writes: the documented ones with APNs pointed at the simulator (its CA mounted
/// beside it), the Redis address podman needs, or the pair's shared store.
enum ContainerRelayConfig {
    /// `json` with `edits` applied, each a path of keys and the value put there (NSNull for null).
    static func edited(_ json: Data, _ edits: [([String], Any)]) -> Data? {
        guard var object = try? JSONSerialization.jsonObject(with: json) as? [String: Any] else { return nil }
        for (path, value) in edits { set(&object, path[...], value) }
        return try? JSONSerialization.data(
            withJSONObject: object, options: [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes])
    }

    private static func set(_ object: inout [String: Any], _ path: ArraySlice<String>, _ value: Any) {
        guard let key = path.first else { return }
        if path.count == 1 {
            object[key] = value
        } else {
            var inner = object[key] as? [String: Any] ?? [:]
            set(&inner, path.dropFirst(), value)
            object[key] = inner
        }
    }

    /// APNs at the simulator (`origin`), trusted through the CA mounted at /etc/duo-relay/ca.pem.
    static func atSimulator(_ origin: String) -> [([String], Any)] {
        [(["apns", "production_origin"], origin), (["apns", "ca_file"], "/etc/duo-relay/ca.pem")]
    }

    /// The pair's relays: limits in the Redis at `url` (refusing without it), every request from the host one
    /// address, so the address limit is high and no proxy header is read.
    static func pair(redis url: String) -> [([String], Any)] {
        [
            (["limits_store"], ["kind": "redis", "url": url, "on_failure": "refuse"]),
            (["ip_limit", "client_ip_header"], NSNull()), (["ip_limit", "requests"], 1000),
        ]
    }

    /// A number at `path`, if there is one.
    static func number(_ json: Data, _ path: [String]) -> Int? {
        var value: Any? = try? JSONSerialization.jsonObject(with: json)
        for key in path { value = (value as? [String: Any])?[key] }
        return (value as? NSNumber)?.intValue
    }

    /// The string at `key` of a JSON object (key 1 of RELAY_KEYS).
    static func string(_ json: Data, _ key: String) -> String? {
        ((try? JSONSerialization.jsonObject(with: json)) as? [String: Any])?[key] as? String
    }
}
