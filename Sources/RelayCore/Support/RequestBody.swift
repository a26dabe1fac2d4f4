import Foundation

/// Reads a request body as one JSON object (DESIGN.md: malformed JSON is `bad_request`).
///
/// Not `JSONDecoder`: it checks only the values it is asked for, so a body whose ignored fields
/// hold a raw control character, a bad escape or a malformed number (found by fuzzing) passed as
/// JSON. `JSONSerialization` checks the whole document at about the same cost, and its nesting
/// limit (512) fits in a small thread stack.
enum RequestBody {
    /// The body's fields, or nil when the body is not exactly one JSON object.
    static func fields(of body: [UInt8]) -> [String: Any]? {
        (try? JSONSerialization.jsonObject(with: Data(body))) as? [String: Any]
    }
}
