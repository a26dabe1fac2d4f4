import Foundation
import RelayCore
import RelayCrypto
import RelayServer

/// `duo-relay keygen [--id N] [--merge FILE]`: prints `{"N":"<base64url 32-byte key>"}` for RELAY_KEYS, or the
/// keys of FILE with the fresh one added.
enum KeygenCommand {
    static var help: String {
        let command = Invocation.command
        return """
            usage: duo-relay keygen [--id N] [--merge FILE]

            Prints a fresh relay key as a JSON object, {"N":"<base64url 32-byte key>"}, ready to be
            RELAY_KEYS. The key comes from the system's random source and is printed only here, on
            standard output.

              --id N         the key id, 0 to 255 (also --id=N); without --id the id is 1 (the
                             default grant_key_id)
              --merge FILE   print the relay keys FILE holds (RELAY_KEYS, a JSON object) with the fresh
                             key added, as one JSON object: the new RELAY_KEYS for a rotation. "-" reads
                             them from standard input. Refused if they already hold id N. FILE is
                             only read: write the output where the secret lives.

            Adding key 2 beside key 1, for each form of the secret:
              a file or a systemd credential (NAME_FILE, $CREDENTIALS_DIRECTORY/RELAY_KEYS,
              a Kubernetes Secret made from a file):
                (umask 077 && \(command) keygen --id 2 --merge RELAY_KEYS > RELAY_KEYS.new) \\
                  && mv RELAY_KEYS.new RELAY_KEYS
              a variable:
                export RELAY_KEYS="$(printf '%s' "$RELAY_KEYS" | \(command) keygen --id 2 --merge -)"

            Exit status: 0 printed, 1 FILE cannot be read, is not RELAY_KEYS, or holds id N already
            (named on standard error, never a key), 64 a usage error.
            """
    }

    static func run(_ arguments: [String]) -> Int32 {
        if Usage.wantsHelp(arguments) { return Usage.help(help) }
        let id: UInt8
        let merge: String?
        do throws(UsageError) {
            try Usage.check(arguments, allowed: ["--id", "--merge"])
            let text = try Usage.option("--id", in: arguments) ?? "1"
            guard let parsed = UInt8(text), String(parsed) == text else {
                throw UsageError(problem: "--id must be a whole number from 0 to 255")
            }
            id = parsed
            merge = try Usage.option("--merge", in: arguments)
        } catch {
            return Usage.fail(error.problem)
        }
        var keys: [UInt8: SymmetricKey] = [:]
        if let merge {
            let text: String?
            if merge == "-" {
                text = String(decoding: FileHandle.standardInput.readDataToEndOfFile(), as: UTF8.self)
            } else {
                text = FileManager.default.contents(atPath: merge).map { String(decoding: $0, as: UTF8.self) }
            }
            guard let text else {
                Log.line("keygen failed: --merge: \(merge) cannot be read", level: .error, event: "keygen_failed")
                return 1
            }
            do throws(ConfigurationError) {
                let trimmed = text.trimmingCharacters(in: .whitespacesAndNewlines)
                keys = try RelaySecrets.parseRelayKeys(trimmed, keygen: Invocation.command + " keygen").keys
            } catch {
                Log.line("keygen failed: --merge: \(error)", level: .error, event: "keygen_failed")
                return 1
            }
            guard keys[id] == nil else {
                Log.line(
                    "keygen failed: RELAY_KEYS: already holds key \(id): choose another --id (it holds "
                        + keys.keys.sorted().map(String.init).joined(separator: ", ") + ")", level: .error,
                    event: "keygen_failed")
                return 1
            }
        }
        keys[id] = SymmetricKey.generate()
        let members = keys.sorted { $0.key < $1.key }.map { id, key in
            #""\#(id)":"\#(key.withUnsafeBytes { Base64.urlEncode(Array($0)) })""#
        }
        Output.standard("{" + members.joined(separator: ",") + "}")
        return 0
    }
}
