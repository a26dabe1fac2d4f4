import CCurl
import Foundation

/// What every transfer of one client shares: the origin, the trust store, the timeouts.
/// Built once by `HTTP2Client.init`, read by the connection threads.
final class TransferSettings: Sendable {
    /// `https://host[:port]`, without a trailing slash.
    let origin: String
    let connectTimeout: Duration
    let maxStreams: Int
    let trust: Trust

    /// How the extra CA file is added to the system's roots.
    enum Trust: Sendable {
        /// curl's defaults: the system's roots.
        case system
        /// `CURLOPT_CAINFO` = the extra file, `CURLOPT_CAPATH` = the system's hashed certificate
        /// directory (curl's built-in default, for example `/etc/ssl/certs` on Debian), which
        /// OpenSSL searches as well: both are trusted.
        case fileAndSystemDirectory(file: String, directory: String)
        /// No system directory is known: the system bundle and the extra file concatenated, as
        /// `CURLOPT_CAINFO_BLOB` (which replaces `CURLOPT_CAINFO`).
        case bundle(CABundle)
    }

    init(configuration: HTTP2ClientConfiguration) throws(HTTP2ClientError) {
        let origin = configuration.origin
        guard origin.lowercased().hasPrefix("https://"), origin.count > "https://".count,
            !origin.dropFirst("https://".count).contains(where: { $0 == "/" || $0 == "?" || $0 == "#" || $0 == " " })
        else {
            throw HTTP2ClientError(
                .invalidConfiguration, "origin must be https://host[:port] without a path",
                mayHaveBeenProcessed: false)
        }
        guard configuration.maxConnections >= 1, configuration.maxStreamsPerConnection >= 1 else {
            throw HTTP2ClientError(
                .invalidConfiguration, "maxConnections and maxStreamsPerConnection must be at least 1",
                mayHaveBeenProcessed: false)
        }
        guard configuration.connectTimeout > .zero else {
            throw HTTP2ClientError(
                .invalidConfiguration, "connectTimeout must be positive", mayHaveBeenProcessed: false)
        }
        self.origin = origin
        self.connectTimeout = configuration.connectTimeout
        self.maxStreams = configuration.maxStreamsPerConnection
        guard let caFile = configuration.caFile else {
            self.trust = .system
            return
        }
        guard let extra = FileManager.default.contents(atPath: caFile), !extra.isEmpty else {
            throw HTTP2ClientError(
                .invalidConfiguration, "cannot read the CA file \(caFile)", mayHaveBeenProcessed: false)
        }
        let defaults = Self.curlDefaultTrust()
        if let directory = defaults.directory {
            self.trust = .fileAndSystemDirectory(file: caFile, directory: directory)
        } else {
            var bytes = [UInt8]()
            if let bundle = defaults.bundle, let system = FileManager.default.contents(atPath: bundle) {
                bytes.append(contentsOf: system)
                bytes.append(UInt8(ascii: "\n"))
            }
            bytes.append(contentsOf: extra)
            self.trust = .bundle(CABundle(bytes))
        }
    }

    /// curl's built-in CA bundle file and directory (CURLINFO_CAINFO / CURLINFO_CAPATH, 7.84+).
    private static func curlDefaultTrust() -> (bundle: String?, directory: String?) {
        _ = CurlGlobal.initialized
        guard let easy = curl_easy_init() else { return (nil, nil) }
        defer { curl_easy_cleanup(easy) }
        var bundle: UnsafeMutablePointer<CChar>?
        var directory: UnsafeMutablePointer<CChar>?
        _ = CCurl_easy_getinfo_string(easy, CURLINFO_CAINFO, &bundle)
        _ = CCurl_easy_getinfo_string(easy, CURLINFO_CAPATH, &directory)
        return (bundle.map { String(cString: $0) }, directory.map { String(cString: $0) })
    }
}

/// PEM bytes handed to curl without copying (`CURL_BLOB_NOCOPY`): they live as long as the
/// client's settings, which outlive every easy handle.
final class CABundle: Sendable {
    // Written once in init, then only read (by curl): safe to share.
    nonisolated(unsafe) let bytes: UnsafeMutableRawBufferPointer
    let count: Int

    init(_ contents: [UInt8]) {
        count = contents.count
        bytes = UnsafeMutableRawBufferPointer.allocate(byteCount: max(contents.count, 1), alignment: 1)
        bytes.copyBytes(from: contents)
    }

    deinit { bytes.deallocate() }
}

/// `curl_global_init`, once per process.
enum CurlGlobal {
    static let initialized: Bool = curl_global_init(Int(CURL_GLOBAL_DEFAULT)) == CURLE_OK
}
