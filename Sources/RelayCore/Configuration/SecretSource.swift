/// Where secrets come from: a variable `NAME`, or `NAME_FILE` naming a file (container and
/// orchestrator secrets), or a systemd credential file `$CREDENTIALS_DIRECTORY/NAME`. More than
/// one of these for the same secret is an error; an empty value counts as absent.
public struct SecretSource: Sendable {
    public let environment: [String: String]
    /// Reads a whole file as UTF-8 text; the I/O is the caller's.
    public let readFile: @Sendable (String) throws -> String

    public init(environment: [String: String], readFile: @escaping @Sendable (String) throws -> String) {
        self.environment = environment
        self.readFile = readFile
    }

    /// The secret `name`, or nil when absent.
    public func value(_ name: String) throws(ConfigurationError) -> String? {
        var found: [(source: String, value: String)] = []
        if let value = environment[name], !value.isEmpty {
            found.append((name, value))
        }
        if let path = environment[name + "_FILE"], !path.isEmpty {
            found.append((name + "_FILE", try read(path, for: name + "_FILE")))
        }
        if let directory = environment["CREDENTIALS_DIRECTORY"], !directory.isEmpty {
            let path = directory + "/" + name
            if let text = try? readFile(path) {
                found.append(("credential " + name, text))
            }
        }
        guard found.count <= 1 else {
            throw ConfigurationError(
                .invalid, name,
                "is given more than once (" + found.map(\.source).joined(separator: ", ") + "): give one")
        }
        guard let value = found.first?.value else { return nil }
        // Files usually end with a newline; secrets never do.
        // (A String sees "\r\n" as one Character: it is named too.)
        let trimmed = String(value.reversed().drop(while: { $0 == "\n" || $0 == "\r" || $0 == "\r\n" }).reversed())
        return trimmed.isEmpty ? nil : trimmed
    }

    private func read(_ path: String, for variable: String) throws(ConfigurationError) -> String {
        do {
            return try readFile(path)
        } catch {
            throw ConfigurationError(.unreadable, variable, "names a file that cannot be read")
        }
    }
}
