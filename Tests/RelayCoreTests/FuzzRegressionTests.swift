import RelayCore
import RelayCrypto
import Testing

/// Inputs that the fuzz targets in Fuzz/ found breaking an invariant, kept so the fixes stay.
@Suite struct FuzzRegressionTests {
    // MARK: - Configuration errors are printed as one log line

    /// True when `text` would print as exactly one plain line.
    static func isOneLine(_ text: String) -> Bool {
        !text.contains(where: \.isNewline)
            && !text.unicodeScalars.contains { $0.properties.generalCategory == .control }
    }

    /// FuzzConfiguration: a key with DEL and invalid UTF-8 in it. As `RELAY_KEYS` text (invalid UTF-8
    /// replaced), the key id with its DEL must not be echoed into the error.
    static let configurationCrash: [UInt8] =
        Array(#"{"01gih"#.utf8) + [0xFF, 0xFF, 0x7F] + Array("f:ttps://apZZZZZZZZZZ".utf8) + [0xAD]
        + Array(#"ZZZZZZZZZZZZZZZZZZi.pX": "httpplkaGx"#.utf8) + [0xC7] + Array(#"d!h5"}"#.utf8)

    /// The error parsing `bytes` as a configuration throws, or nil.
    static func configurationError(_ bytes: [UInt8]) -> ConfigurationError? {
        do {
            _ = try RelayConfiguration.parse(bytes)
            return nil
        } catch {
            return error
        }
    }

    /// The error parsing `text` as `RELAY_KEYS` throws, or nil.
    static func relayKeysError(_ text: String) -> ConfigurationError? {
        do {
            _ = try RelaySecrets.parseRelayKeys(text)
            return nil
        } catch {
            return error
        }
    }

    @Test func fuzzedConfigurationErrorIsOneLine() throws {
        let error = try #require(Self.configurationError(Self.configurationCrash))
        #expect(Self.isOneLine(error.description), "\(error.description.debugDescription)")
        let keysError = try #require(Self.relayKeysError(String(decoding: Self.configurationCrash, as: UTF8.self)))
        #expect(Self.isOneLine(keysError.description), "\(keysError.description.debugDescription)")
    }

    @Test(arguments: [#"a\nb"#, #"a\r\nb"#, #"\u001b[2Jx"#, #"a\u2028b"#, #"a\u0085b"#, #"a\u202eb"#])
    func unknownKeyWithLineBreaksStaysOnOneLine(_ escapedKey: String) throws {
        let text = #"{"apns":{"topic":"a"},"\#(escapedKey)":1}"#
        let error = try #require(Self.configurationError(Array(text.utf8)))
        #expect(error.code == .unknownKey)
        #expect(Self.isOneLine(error.description), "\(error.description.debugDescription)")
        // A key with such characters does not look like a configuration key: it is not repeated at all.
        #expect(error.description.contains("not shown"), "\(error.description.debugDescription)")
        #expect(!error.description.contains(#"\u{"#), "not even escaped")
    }

    @Test func relayKeyIDWithTerminalEscapeStaysOnOneLine() throws {
        let error = try #require(Self.relayKeysError(#"{"\u001b[31m":"AAAA"}"#))
        #expect(Self.isOneLine(error.description), "\(error.description.debugDescription)")
    }

    // MARK: - Request bodies must be JSON throughout, ignored fields included

    /// FuzzGrantRequest: raw NUL bytes inside an ignored field's string.
    static let grantRequestCrash: [UInt8] =
        Array(#"{"environment":"production","tokironment":"produ"#.utf8) + [0, 0, 0, 0]
        + Array(#"n","token":"AB01AB01ABB0AA00AB01A1AB01AB01AB01AB01","x":1}"#.utf8)

    /// Ignored fields that are not JSON: a raw control character, a bad escape, a leading zero,
    /// a number without digits after its point, a number out of range, a bad literal.
    static let notJSON = [#""a\#u{1}b""#, #""\q""#, "01", "1.", "1e999", "11e999", "-1e400", "tru"]

    @Test func fuzzedGrantRequestIsRefused() {
        #expect(throws: RelayError.badRequest) { _ = try GrantRequest.parse(Self.grantRequestCrash) }
    }

    @Test(arguments: notJSON)
    func grantRequestWithMalformedIgnoredFieldIsRefused(_ value: String) throws {
        let valid = #"{"token":"abcd","environment":"sandbox","x":1}"#
        #expect(try GrantRequest.parse(Array(valid.utf8)).token == [0xAB, 0xCD])
        let body = #"{"token":"abcd","environment":"sandbox","x":\#(value)}"#
        #expect(throws: RelayError.badRequest) { _ = try GrantRequest.parse(Array(body.utf8)) }
    }

    @Test(arguments: notJSON)
    func pushWithMalformedIgnoredFieldIsRefused(_ value: String) throws {
        let sealed = Base64.encode([UInt8](repeating: 7, count: PushRequest.sealedByteCount))
        let hex = String(repeating: "0f", count: 32)
        func body(_ extra: String) -> [UInt8] {
            Array(#"{"grant":"g","sealed":"\#(sealed)","id":"\#(hex)","thread":"\#(hex)","x":\#(extra)}"#.utf8)
        }
        #expect(try PushRequest.parse(body("[1,{}]")).id == hex)
        #expect(throws: RelayError.badRequest) { _ = try PushRequest.parse(body(value)) }
    }

    /// Found by fuzzing the JSON scanner: a field given twice. Readers keeping the first and readers
    /// keeping the last would disagree on which token this names, so it names none.
    @Test func duplicateWantedMemberIsRefused() throws {
        let grant = #"{"token":"ab","token":"zz","environment":"sandbox"}"#
        #expect(throws: RelayError.badRequest) { _ = try GrantRequest.parse(Array(grant.utf8)) }
        let twice = #"{"token":"ab","environment":"sandbox","environment":"sandbox"}"#
        #expect(throws: RelayError.badRequest) { _ = try GrantRequest.parse(Array(twice.utf8)) }
        // An unknown member given twice is refused too (docs/DESIGN.md, "Duplicates": any member named twice).
        let unknownTwice = #"{"token":"ab","x":1,"x":2,"environment":"sandbox"}"#
        #expect(throws: RelayError.badRequest) { _ = try GrantRequest.parse(Array(unknownTwice.utf8)) }
        // Unknown members named once each are still ignored.
        let ignored = #"{"token":"ab","x":1,"y":2,"environment":"sandbox"}"#
        #expect(try GrantRequest.parse(Array(ignored.utf8)).token == [0xAB])
        let sealed = Base64.encode([UInt8](repeating: 7, count: PushRequest.sealedByteCount))
        let hex = String(repeating: "0f", count: 32)
        let push = #"{"grant":"g","grant":"h","sealed":"\#(sealed)","id":"\#(hex)","thread":"\#(hex)"}"#
        #expect(throws: RelayError.badRequest) { _ = try PushRequest.parse(Array(push.utf8)) }
    }
}
