import Foundation
import RelayCore
import RelayCrypto
import Testing

/// `detail` names the field or rule at fault, never a value from the request (docs/DESIGN.md, "HTTP API").
@Suite struct ErrorDetailTests {
    static let sealed = Base64.encode([UInt8](repeating: 0x5a, count: 2934))
    static let hex64 = String(repeating: "cD", count: 32)

    static func push(
        grant: String = #""g""#, sealed: String = #""\#(sealed)""#, id: String = #""\#(hex64)""#,
        thread: String = #""\#(hex64)""#
    ) -> String {
        #"{"grant":\#(grant),"sealed":\#(sealed),"id":\#(id),"thread":\#(thread)}"#
    }

    /// The detail of the `bad_request` that `parse` throws for `body`; nil if it is accepted.
    func detail<T>(_ body: String, _ parse: ([UInt8]) throws(RelayError) -> T) -> String? {
        do throws(RelayError) {
            _ = try parse(Array(body.utf8))
            return nil
        } catch {
            #expect(error.code == .badRequest)
            return error.detail
        }
    }

    func detail(push body: String) -> String? { detail(body, PushRequest.parse) }

    func detail(grant body: String) -> String? { detail(body, GrantRequest.parse) }

    static let malformed = "body: must be one JSON object (RFC 8259) in UTF-8"

    @Test(arguments: [
        (
            push(sealed: #""\#(Base64.encode([UInt8](repeating: 1, count: 2933)))""#),
            "sealed: must be standard base64 of exactly 2934 bytes"
        ),
        (
            push(sealed: #""\#(sealed.replacingOccurrences(of: "W", with: "-"))""#),
            "sealed: must be standard base64 of exactly 2934 bytes"
        ),
        (push(id: #""\#(hex64.dropLast())""#), "id: must be 64 hex characters"),
        (push(thread: #""\#(String(repeating: "g", count: 64))""#), "thread: must be 64 hex characters"),
        (push(grant: "5"), "grant: must be a string"),
        (push(sealed: "null"), "sealed: must be a string"),
        (push(id: "[]"), "id: must be a string"),
        (push(thread: "{}"), "thread: must be a string"),
        (
            #"{"sealed":"\#(sealed)","id":"\#(hex64)","thread":"\#(hex64)"}"#,
            "grant: required (the grant the phone obtained from /v1/grant)"
        ),
        (
            #"{"grant":"g","id":"\#(hex64)","thread":"\#(hex64)"}"#,
            "sealed: required (standard base64 of exactly 2934 bytes)"
        ),
        (#"{"grant":"g","sealed":"\#(sealed)","thread":"\#(hex64)"}"#, "id: required (64 hex characters)"),
        (#"{"grant":"g","sealed":"\#(sealed)","id":"\#(hex64)"}"#, "thread: required (64 hex characters)"),
        (
            #"{"grant":"g","grant":"h","sealed":"\#(sealed)","id":"\#(hex64)","thread":"\#(hex64)"}"#,
            "grant: given more than once"
        ),
        (push(thread: #""\#(hex64)","thread":"\#(hex64)""#), "thread: given more than once"),
        // A member the relay does not read, named twice: refused without repeating its name.
        (push(thread: #""\#(hex64)","x":1,"x":2"#), "body: a member is given more than once"),
        (push(grant: #""g","x\u0079z":1,"xyz":[]"#), "body: a member is given more than once"),
        (push() + ",", malformed), ("{", malformed), ("", malformed), ("[]", malformed), ("nope", malformed),
        (push(grant: #""\u00""#), malformed),
    ])
    func pushDetails(_ body: String, _ expected: String) {
        #expect(detail(push: body) == expected)
    }

    @Test(arguments: [
        (#"{"token":"abc","environment":"sandbox"}"#, "token: must be even-length hex, 2 to 1024 characters"),
        (#"{"token":"zz","environment":"sandbox"}"#, "token: must be even-length hex, 2 to 1024 characters"),
        (#"{"token":"","environment":"sandbox"}"#, "token: must be even-length hex, 2 to 1024 characters"),
        (
            #"{"token":"\#(String(repeating: "a", count: 1026))","environment":"sandbox"}"#,
            "token: must be even-length hex, 2 to 1024 characters"
        ),
        (#"{"token":"abcd","environment":"staging"}"#, #"environment: must be "sandbox" or "production""#),
        (#"{"token":12,"environment":"sandbox"}"#, "token: must be a string"),
        (#"{"token":"abcd","environment":true}"#, "environment: must be a string"),
        (#"{"environment":"sandbox"}"#, "token: required (the APNs device token, hex)"),
        (#"{"token":"abcd"}"#, #"environment: required ("sandbox" or "production")"#),
        (
            #"{"token":"abcd","environment":"sandbox","environment":"production"}"#,
            "environment: given more than once"
        ),
        (
            #"{"x":{"y":1,"y":2},"token":"abcd","x":null,"environment":"sandbox"}"#,
            "body: a member is given more than once"
        ),
        (#"{"token":"abcd","environment":"sandbox"} x"#, malformed),
        ("\u{FF}", malformed),
    ])
    func grantDetails(_ body: String, _ expected: String) {
        #expect(detail(grant: body) == expected)
    }

    @Test func aDetailNeverCarriesTheRequestsValue() {
        let token = "0123456789abcdefXYZ"
        let text = detail(grant: #"{"token":"\#(token)","environment":"moon-base"}"#) ?? ""
        #expect(!text.contains(token) && !text.contains("moon-base"))
        let id = String(repeating: "q", count: 64)
        #expect(!(detail(push: Self.push(id: #""\#(id)""#)) ?? "").contains(id))
    }

    @Test func bodiesCarryDetailAndLimit() {
        #expect(
            RelayError.badRequest.detail(#"environment: must be "sandbox" or "production""#).body
                == #"{"error":"bad_request","detail":"environment: must be \"sandbox\" or \"production\""}"#)
        #expect(
            RelayError(.rateLimited, retryAfter: 7, limit: .phone).body == #"{"error":"rate_limited","limit":"phone"}"#)
        #expect(RelayError(.overloaded, retryAfter: 1).body == #"{"error":"overloaded"}"#)
        // Clients decide by code and limit, so equality ignores the detail.
        #expect(RelayError.badRequest.detail("x: y") == RelayError.badRequest)
        #expect(RelayError(.rateLimited, limit: .phone) != RelayError(.rateLimited, limit: .address))
    }

    @Test func apnsTooManyRequestsSaysTheLimitIsAPNs() {
        let action = APNsAnswer(status: 429, reason: "TooManyRequests", apnsID: nil).action(retryAfter: 30)
        guard case .answer(.failure(let error)) = action else {
            Issue.record("not an error answer: \(action)")
            return
        }
        #expect(error.limit == .apns)
        #expect(error.retryAfter == 30)
        #expect(error.body == #"{"error":"rate_limited","limit":"apns"}"#)
    }
}

/// docs/API.md lists the details callers will see: each one the parsers give is there, word for word.
@Suite struct ErrorDetailDocumentationTests {
    static let apiDocument: String = {
        var url = URL(fileURLWithPath: #filePath)
        for _ in 0..<3 { url.deleteLastPathComponent() }
        return (try? String(contentsOf: url.appendingPathComponent("docs/API.md"), encoding: .utf8)) ?? ""
    }()

    @Test func everyFieldDetailIsDocumented() throws {
        #expect(!Self.apiDocument.isEmpty, "docs/API.md not found")
        let sealed = Base64.encode([UInt8](repeating: 0x5a, count: 2934))
        let hex = String(repeating: "ab", count: 32)
        let bodies: [(push: Bool, body: String)] = [
            (true, #"{"sealed":"\#(sealed)","id":"\#(hex)","thread":"\#(hex)"}"#),
            (true, #"{"grant":"g","id":"\#(hex)","thread":"\#(hex)"}"#),
            (true, #"{"grant":"g","sealed":"\#(sealed)","thread":"\#(hex)"}"#),
            (true, #"{"grant":"g","sealed":"\#(sealed)","id":"\#(hex)"}"#),
            (true, #"{"grant":"g","sealed":"AAAA","id":"\#(hex)","thread":"\#(hex)"}"#),
            (true, #"{"grant":"g","sealed":"\#(sealed)","id":"x","thread":"\#(hex)"}"#),
            (true, #"{"grant":"g","sealed":"\#(sealed)","id":"\#(hex)","thread":"x"}"#),
            (true, "{"), (false, #"{"environment":"sandbox"}"#), (false, #"{"token":"ab"}"#),
            (false, #"{"token":"a","environment":"sandbox"}"#), (false, #"{"token":"ab","environment":"x"}"#),
            (false, #"{"token":"ab","environment":"sandbox","x":1,"x":1}"#),
        ]
        for (isPush, body) in bodies {
            let bytes = Array(body.utf8)
            let detail: String?
            do throws(RelayError) {
                if isPush { _ = try PushRequest.parse(bytes) } else { _ = try GrantRequest.parse(bytes) }
                detail = nil
            } catch {
                detail = error.detail
            }
            let text = try #require(detail, "\(body) was accepted")
            #expect(Self.apiDocument.contains("`\(text)`"), "docs/API.md lacks \(text)")
        }
        // The two forms shared by every field are documented once, with <field>.
        #expect(Self.apiDocument.contains("`<field>: must be a string`"))
        #expect(Self.apiDocument.contains("`<field>: given more than once`"))
    }
}
