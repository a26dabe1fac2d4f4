import Testing

@testable import RelayServer

/// The escaping of text the relay puts into its own answers (an `apns-id` in a push's 200).
@Suite struct JSONTextTests {
    @Test func aUUIDIsReturnedAsItIs() {
        let id = "1E2D3C4B-5A69-7887-96A5-B4C3D2E1F00F"
        #expect(JSONText.escape(id) == id)
        #expect(JSONText.escape("") == "")
    }

    @Test func quotesAndBackslashesAreEscapedAndControlCharactersBecomeSpaces() {
        #expect(JSONText.escape(#"a"b\c"#) == #"a\"b\\c"#)
        #expect(JSONText.escape("a\nb\u{1}c\u{1F}") == "a b c ")
        #expect(JSONText.escape("é\"ü") == "é\\\"ü")
    }
}
