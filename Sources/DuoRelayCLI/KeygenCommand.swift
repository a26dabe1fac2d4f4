import RelayCrypto

/// `duo-relay keygen [--id N]`: prints `{"N":"<base64url 32-byte key>"}` for RELAY_KEYS.
enum KeygenCommand {
    static func run(_ arguments: [String]) -> Int32 {
        let id: UInt8
        do throws(UsageError) {
            try Usage.check(arguments, allowed: ["--id"])
            let text = try Usage.option("--id", in: arguments) ?? "1"
            guard let parsed = UInt8(text), String(parsed) == text else {
                throw UsageError(problem: "--id must be a whole number from 0 to 255")
            }
            id = parsed
        } catch {
            return Usage.fail(error.problem)
        }
        let key = SymmetricKey.generate().withUnsafeBytes { Base64.urlEncode(Array($0)) }
        Output.standard(#"{"\#(id)":"\#(key)"}"#)
        return 0
    }
}
