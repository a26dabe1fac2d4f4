import Foundation

/// The `reason` of an APNs error body.
func reason(of body: String) throws -> String? {
    let object = try JSONSerialization.jsonObject(with: Data(body.utf8)) as? [String: Any]
    return object?["reason"] as? String
}

/// A compact JSON object of exactly `size` bytes.
func jsonObject(ofSize size: Int) -> String {
    let frame = #"{"aps":{},"sealed":""}"#
    return #"{"aps":{},"sealed":""# + String(repeating: "A", count: size - frame.utf8.count) + #""}"#
}
