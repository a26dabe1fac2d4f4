/// One string member of a request body, with the sentences that name it when it is at fault
/// (`detail` in docs/DESIGN.md, "HTTP API"). Static text only: a detail never carries a value from the
/// request, and the success path builds none.
struct RequestField: Sendable {
    let missing: StaticString
    let notString: StaticString
    let duplicated: StaticString

    static let malformedBody: StaticString = "body: must be one JSON object (RFC 8259) in UTF-8"
    /// A member the relay does not read, given twice: not named (its name comes from the request).
    static let duplicateMember: StaticString = "body: a member is given more than once"

    /// The members `names` of `body`, in order, each a string (read them with `text`); otherwise
    /// `bad_request` naming the first field or rule at fault. `fields` describe `names`, in the same order
    /// (two static arrays, so that nothing is built per request).
    static func strings(
        _ fields: [RequestField], names: [String], in body: [UInt8]
    ) throws(RelayError) -> [JSONObjectScanner.Member] {
        switch JSONObjectScanner.scan(names, in: body) {
        case .malformed:
            throw RelayError.badRequest.detail(malformedBody)
        case .duplicate(let slot):
            throw RelayError.badRequest.detail(fields[slot].duplicated)
        case .duplicateUnknown:
            throw RelayError.badRequest.detail(duplicateMember)
        case .members(let members):
            for (slot, member) in members.enumerated() {
                switch member {
                case .string: continue
                case .absent: throw RelayError.badRequest.detail(fields[slot].missing)
                case .mismatched: throw RelayError.badRequest.detail(fields[slot].notString)
                }
            }
            return members
        }
    }
}
