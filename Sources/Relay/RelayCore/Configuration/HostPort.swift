import ErrorCodes

/// `host[:port]` or `[ipv6][:port]`, split the one way for every address the configuration reads (`listen`,
/// `metrics_listen`, `apns.proxy`, the APNs origins). What each key requires beyond that (a port given, a port above
/// 0, an IP address, an IPv6 literal in the brackets) it checks in its own words, naming itself.
struct HostPort {
    /// The host; an IPv6 literal without its brackets.
    var host: Substring
    /// Whether the host was written in brackets.
    var isBracketed: Bool
    /// What follows the host's `:`, as written (possibly empty); nil without a `:`.
    var portText: Substring?

    enum Problem: CodedError {
        /// A `[` without its `]`.
        case unclosedBracket
        /// A second `:` outside brackets, or something other than `:port` after the `]`.
        case notHostPort

        var code: ErrorCode<Problem> {
            switch self {
            case .unclosedBracket: ErrorCode("unclosed_bracket")
            case .notHostPort: ErrorCode("not_host_port")
            }
        }

        var reason: String {
            switch self {
            case .unclosedBracket: "has an unclosed [ipv6] host"
            case .notHostPort: "is not host[:port]"
            }
        }
    }

    init(_ text: Substring) throws(Problem) {
        if text.hasPrefix("[") {
            guard let close = text.firstIndex(of: "]") else { throw .unclosedBracket }
            host = text[text.index(after: text.startIndex)..<close]
            isBracketed = true
            let after = text[text.index(after: close)...]
            guard after.isEmpty || after.hasPrefix(":") else { throw .notHostPort }
            portText = after.isEmpty ? nil : after.dropFirst()
        } else {
            let parts = text.split(separator: ":", omittingEmptySubsequences: false)
            guard parts.count <= 2 else { throw .notHostPort }
            host = parts[0]
            isBracketed = false
            portText = parts.count == 2 ? parts[1] : nil
        }
    }

    /// ``init(_:)`` for the configuration's `key`: an unclosed bracket said so, any other shape refused as `form`
    /// (the key's own words); never repeating the text, which may carry a password.
    init(_ text: Substring, key: String, form: String) throws(ConfigurationError) {
        do throws(Problem) {
            self = try HostPort(text)
        } catch {
            throw ConfigurationError(.invalid, key, error == .unclosedBracket ? error.reason : form)
        }
    }

    /// The port of `text`: one to five ASCII digits, at most 65535 (0 included: `listen` takes it); nil otherwise.
    static func port(_ text: Substring) -> UInt16? {
        guard (1...5).contains(text.count), text.allSatisfy({ $0.isASCII && $0.isNumber }) else { return nil }
        return UInt16(text)
    }
}
