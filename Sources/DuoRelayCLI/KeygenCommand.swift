import RelayCrypto

/// `duo-relay keygen [--id N]`: prints `{"N":"<base64url 32-byte key>"}` for RELAY_KEYS.
enum KeygenCommand {
    static let help = """
        usage: duo-relay keygen [--id N]

        Prints a fresh relay key as a JSON object, {"N":"<base64url 32-byte key>"}, ready to merge
        into RELAY_KEYS. --id N chooses the key id (0 to 255); without --id the id is 1 (the
        default grant_key_id). The key comes from the system's random source and is printed only
        here, on standard output.

        Exit status: 0 printed, 64 a usage error.
        """

    static func run(_ arguments: [String]) -> Int32 {
        if Usage.wantsHelp(arguments) { return Usage.help(help) }
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
