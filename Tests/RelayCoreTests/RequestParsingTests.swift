import Foundation
import RelayCore
import RelayTestSupport
import Testing

/// The request parser is hand-written (JSONDecoder would be the relay's top cost per push): these tests
/// hold it to what `JSONDecoder` decides, body by body.
@Suite struct RequestParsingTests {
    /// The reference parse: `JSONDecoder` on the same fields.
    struct Wire: Decodable, Equatable {
        let token: String
        let environment: String
    }

    static func reference(_ body: [UInt8]) -> Wire? {
        try? JSONDecoder().decode(Wire.self, from: Data(body))
    }

    /// What the hand-written parser saw, expressed through a grant request: the token text is
    /// hex-decoded, so the bodies below use hex tokens (escaped or not) to compare values.
    static func parsed(_ body: [UInt8]) -> GrantRequest? {
        try? GrantRequest.parse(body)
    }

    static func expected(_ body: [UInt8]) -> GrantRequest? {
        guard let wire = reference(body), wire.token.utf8.count >= 2, wire.token.utf8.count <= 1024,
            let token = TestHex.decode(wire.token), let environment = APNsEnvironment(name: wire.environment)
        else { return nil }
        return GrantRequest(token: token, environment: environment)
    }

    static let bodies: [String] = [
        #"{"token":"abcd","environment":"sandbox"}"#,
        #" { "token" : "abcd" , "environment" : "production" } "#,
        "\t\r\n{\"token\":\"abcd\",\"environment\":\"sandbox\"}\n",
        #"{"token":"\u0061bcd","environment":"sandbox"}"#,
        #"{"tok\u0065n":"abcd","environment":"sandbox"}"#,
        #"{"token":"ab\/cd","environment":"sandbox"}"#,
        #"{"token":"abcd","environment":"sand\u0062ox"}"#,
        #"{"token":"abcd","environment":"sandbox","x":{"a":[1,-2.5e+3,true,false,null,{"b":"\u00e9\ud83d\ude00"}]}}"#,
        #"{"token":"abcd","environment":"sandbox","x":[]}"#,
        #"{"token":"abcd","environment":"sandbox","x":{}}"#,
        #"{"token":"abcd","environment":"sandbox","x":"é"}"#,
        #"{"token":"abcd","environment":"sandbox","x":0}"#,
        #"{"token":"abcd","environment":"sandbox","x":-0.0E-0}"#,
        "{\"token\":\"ab\tcd\",\"environment\":\"sandbox\"}",
        #"{'token':'abcd','environment':'sandbox'}"#,
        #"{token:"abcd","environment":"sandbox"}"#,
        #"{"token":"abcd","environment":null}"#,
        #"{"token":["abcd"],"environment":"sandbox"}"#,
        #"{"token":{"a":"abcd"},"environment":"sandbox"}"#,
        #"["token","abcd"]"#, "", " ", "{}", "null", "\"abcd\"", "{", "}",
    ]

    /// Malformed JSON: 400, as docs/DESIGN.md asks. JSONDecoder refused some of these too, and let the others
    /// pass because the fault sits in a member it never reads (`01`, `1.`, `1e`, trailing commas, bad
    /// escapes, lone surrogates, raw control characters).
    static let malformed: [String] = [
        #"{"token":"abcd","environment":"sandbox","x":01}"#,
        #"{"token":"abcd","environment":"sandbox","x":1.}"#,
        #"{"token":"abcd","environment":"sandbox","x":.5}"#,
        #"{"token":"abcd","environment":"sandbox","x":+1}"#,
        #"{"token":"abcd","environment":"sandbox","x":1e}"#,
        #"{"token":"abcd","environment":"sandbox","x":tru}"#,
        #"{"token":"abcd","environment":"sandbox","x":nul}"#,
        #"{"token":"abcd","environment":"sandbox","x":[1,]}"#,
        #"{"token":"abcd","environment":"sandbox",}"#,
        #"{"token":"abcd","environment":"sandbox"}x"#,
        #"{"token":"abcd","environment":"sandbox"}{}"#,
        #"{"token":"abcd" "environment":"sandbox"}"#,
        #"{"token":"abcd","environment":"sandbox""#,
        #"{"token":"abcd","environment":"sandbox","x":"\q"}"#,
        #"{"token":"abcd","environment":"sandbox","x":"\ud83d"}"#,
        #"{"token":"abcd","environment":"sandbox","x":"\ude00"}"#,
        #"{"token":"abcd","environment":"sandbox","x":"\u12"}"#,
        "{\"token\":\"abcd\",\"environment\":\"sandbox\",\"x\":\"\u{1}\"}",
        // A wanted member given twice (JSONDecoder kept the first; other readers keep the last).
        #"{"token":"abcd","environment":"sandbox","token":"ef01"}"#,
        #"{"token":5,"environment":"sandbox","token":"ef01"}"#,
    ]

    @Test(arguments: malformed)
    func malformedJSONIsRefused(_ text: String) {
        #expect(Self.parsed(Array(text.utf8)) == nil)
    }

    @Test(arguments: bodies)
    func agreesWithJSONDecoder(_ text: String) {
        let body = Array(text.utf8)
        #expect(Self.parsed(body) == Self.expected(body))
    }

    @Test func agreesOnRawBytes() {
        let cases: [[UInt8]] = [
            [0xEF, 0xBB, 0xBF] + Array(#"{"token":"abcd","environment":"sandbox"}"#.utf8),
            Array(#"{"token":"abcd","environment":"sandbox"}"#.utf8) + [0],
            Array(#"{"token":"ab"#.utf8) + [0xC3, 0x28] + Array(#"","environment":"sandbox"}"#.utf8),
        ]
        for body in cases {
            #expect(Self.parsed(body) == Self.expected(body))
        }
    }

    /// The body is checked sixteen bytes at a time, then eight: the bad bytes go at every offset of both.
    @Test func invalidUTF8IsRefused() {
        for bad: [UInt8] in [[0xC3, 0x28], [0xFF], [0xED, 0xA0, 0x80]] {
            for padding in 0..<40 {
                let body =
                    Array(#"{"token":"abcd","environment":"sandbox","x":""#.utf8)
                    + Array(repeating: UInt8(ascii: "a"), count: padding) + bad + Array(#""}"#.utf8)
                #expect(Self.parsed(body) == nil, "bad bytes after \(padding) more")
            }
        }
    }

    /// Strings are scanned sixteen bytes at a time, then eight: put the character that ends the
    /// fast path at every offset of both words of a pair, and of the single word after it.
    @Test func specialCharactersAtEveryOffset() {
        let after = String(repeating: "b", count: 22)
        for offset in 0..<40 {
            let before = String(repeating: "a", count: offset % 2 == 0 ? offset : offset + 1)
            for middle in [#"\u0061a"#, #"\u00e9"#, "é", #"\""#] {
                let body = Array(
                    #"{"x":"\#(before)\#(middle)\#(after)","token":"\#(before)\#(after)","environment":"sandbox"}"#.utf8
                )
                #expect(Self.parsed(body) == Self.expected(body))
                #expect(Self.parsed(body) != nil)
            }
            for middle in [#"\u0061a"#, "\u{1}", #"\""#] {
                let body = Array(#"{"token":"\#(before)\#(middle)\#(after)","environment":"sandbox"}"#.utf8)
                #expect(Self.parsed(body) == Self.expected(body))
            }
        }
    }

    @Test func nestingDepthIsBounded() {
        let deep =
            #"{"token":"abcd","environment":"sandbox","x":"# + String(repeating: "[", count: 600)
            + String(repeating: "]", count: 600) + "}"
        #expect(Self.parsed(Array(deep.utf8)) == nil)
        let shallow =
            #"{"token":"abcd","environment":"sandbox","x":"# + String(repeating: "[", count: 100)
            + String(repeating: "]", count: 100) + "}"
        #expect(Self.parsed(Array(shallow.utf8)) == Self.expected(Array(shallow.utf8)))
        #expect(Self.parsed(Array(shallow.utf8)) != nil)
    }

    @Test func pushFieldsKeepTheirText() throws {
        let sealed = String(repeating: "AAAB", count: PushRequest.sealedTextLength / 4)
        let hex = String(repeating: "aB", count: 32)
        let body = #"{"thread":"\#(hex)","id":"\#(hex)","sealed":"\#(sealed)","grant":"g\u005fh","x":[{}]}"#
        let request = try PushRequest.parse(Array(body.utf8))
        #expect(request == PushRequest(grant: "g_h", sealed: sealed, id: hex, thread: hex))
    }
}
