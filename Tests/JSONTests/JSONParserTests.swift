import ErrorCodes
import JSON
import Testing

/// The one JSON reader on its own: values as RFC 8259 reads them, what is not JSON refused by line and column, a
/// member named twice refused by its path.
@Suite struct JSONParserTests {
    static func parse(_ text: String) throws(JSONParser.Failure) -> JSONValue {
        try JSONParser.parse(Array(text.utf8))
    }

    /// The reason a text was refused for, or nil when it was read (Failure's `==` compares codes alone).
    static func refusal(_ bytes: [UInt8]) -> String? {
        do {
            _ = try JSONParser.parse(bytes)
            return nil
        } catch {
            return error.reason
        }
    }

    @Test func valuesReadExactly() throws {
        let value = try Self.parse(
            " {\"a\" : [1, -0, 1.5, -2.5e3, 9223372036854775808, true, false, null],\r\n\t\"b\": {\"c\": \"x\\\"\\\\\\/\\b\\f\\n\\r\\t\\u00e9\\ud83d\\ude00\"}} "
        )
        #expect(
            value
                == .object([
                    "a": .array([
                        .integer(1), .integer(0), .number(1.5), .number(-2500), .number(9_223_372_036_854_775_808),
                        .bool(true), .bool(false), .null,
                    ]),
                    "b": .object(["c": .string("x\"\\/\u{8}\u{c}\n\r\té😀")]),
                ]))
        #expect(try Self.parse("[]") == .array([]))
        #expect(try Self.parse("{}") == .object([:]))
        #expect(try Self.parse("\"\"") == .string(""))
        #expect(JSONValue.parse(Array("[1,]".utf8)) == nil)
        #expect(JSONValue.parse(Array("-12".utf8)) == .integer(-12))
    }

    @Test(arguments: [
        ("", 1, 1, "unexpected end of the text: a value is missing"),
        ("{\n  \"a\": 1,\n}", 3, 1, "expected a member name after ',' (a trailing comma is not JSON)"),
        ("[1,\n ]", 2, 2, "expected a value after ',' (a trailing comma is not JSON)"),
        ("{'a': 1}", 1, 2, "expected a member name in double quotes"),
        (#"{"a" 1}"#, 1, 6, "expected ':' after a member name"),
        (#"{"a": 1 "b": 2}"#, 1, 9, "expected ',' or '}' after a member"),
        ("[1 2]", 1, 4, "expected ',' or ']' after an element"),
        ("01", 1, 2, "a number must not start with a leading zero"),
        ("1.", 1, 3, "invalid number: a digit was expected after '.'"),
        ("1e+", 1, 4, "invalid number: a digit was expected in the exponent"),
        ("1e999", 1, 6, "number out of range"),
        ("nul", 1, 4, "unexpected character: a value was expected"),
        ("\"a", 1, 3, "unterminated string"),
        ("\"a\u{1}\"", 1, 3, "a control character in a string must be escaped"),
        (#""\x""#, 1, 3, "invalid escape in a string"),
        (#""\u12""#, 1, 6, #"a \u escape needs four hex digits"#),
        (#""\udc00""#, 1, 8, #"a \u escape of a lone surrogate"#),
        (#""\ud800x""#, 1, 8, #"a \u escape of a high surrogate must be followed by a low one"#),
        ("{} {}", 1, 4, "unexpected text after the JSON value"),
    ])
    func refusedWhereTheProblemIs(_ text: String, _ line: Int, _ column: Int, _ problem: String) {
        #expect(Self.refusal(Array(text.utf8)) == "line \(line), column \(column): \(problem)")
    }

    @Test func aMemberNamedTwiceIsRefusedWithItsPathNotItsValue() {
        let text = #"{"a":{"b":{"secret":1,"\u0073ecret":2}}}"#
        do {
            _ = try Self.parse(text)
            Issue.record("accepted a member named twice")
        } catch {
            guard case .duplicateMember(let path) = error else {
                Issue.record("refused otherwise: \(error.reason)")
                return
            }
            #expect(path == ["a", "b", "secret"])
            #expect(error.reason == "a member is given more than once, 3 levels deep")
            #expect(error.code == JSONParser.Failure.duplicateMember(path: []).code)
        }
        #expect(JSONValue.parse(Array(#"[{"a":1},{"a":1}]"#.utf8)) != nil)
    }

    @Test func notUTF8IsRefused() {
        #expect(Self.refusal(Array("\"a".utf8) + [0xff, 0x22]) == "line 1, column 1: the text is not UTF-8")
    }

    @Test func nestingIsBounded() throws {
        let deepest = JSONParser.maximumDepth
        let accepted = String(repeating: "[", count: deepest) + String(repeating: "]", count: deepest)
        #expect(JSONValue.parse(Array(accepted.utf8)) != nil)
        let refused = String(repeating: "[", count: deepest + 1) + String(repeating: "]", count: deepest + 1)
        #expect(Self.refusal(Array(refused.utf8)) == "line 1, column \(deepest + 1): nested too deeply")
    }
}
