/// Where secrets come from: a variable `NAME`, or `NAME_FILE` naming a file (container and
/// orchestrator secrets), or a systemd credential file `$CREDENTIALS_DIRECTORY/NAME`. More than
/// one of these for the same secret is an error; an empty value counts as absent.
public struct SecretSource: Sendable {
    public let environment: [String: String]
    /// Reads a whole file as UTF-8 text; the I/O is the caller's.
    public let readFile: @Sendable (String) throws -> String
    /// Whether a directory entry exists at a path, whatever it is (a file, a directory, a dangling link): a
    /// credential that exists but cannot be read is an error, not an absent secret.
    public let entryExists: @Sendable (String) -> Bool

    public init(
        environment: [String: String], entryExists: @escaping @Sendable (String) -> Bool = { _ in false },
        readFile: @escaping @Sendable (String) throws -> String
    ) {
        self.environment = environment
        self.entryExists = entryExists
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
            do {
                found.append(("credential " + name, try readFile(path)))
            } catch {
                if entryExists(path) {
                    throw ConfigurationError(
                        .unreadable, name,
                        "is a credential in $CREDENTIALS_DIRECTORY that cannot be read "
                            + "(a directory, a dangling link or no permission)")
                }
            }
        }
        guard found.count <= 1 else {
            throw ConfigurationError(
                .invalid, name,
                "is given more than once (" + found.map(\.source).joined(separator: ", ") + "): give one")
        }
        guard let value = found.first?.value else { return nil }
        // Files usually end with a newline (`\n`, or `\r\n` from Windows editors); secrets never do. By scalars:
        // as a Character, "\r\n" is one grapheme that equals neither "\n" nor "\r".
        var scalars = value.unicodeScalars[...]
        while let last = scalars.last, last == "\n" || last == "\r" { scalars = scalars.dropLast() }
        return scalars.isEmpty ? nil : String(scalars)
    }

    /// "is not set", and where a credential for `name` was looked for: the file's path in the credentials directory,
    /// when one is given (a path is not a secret), so that a file missing there is named.
    public func notSet(_ name: String) -> String {
        guard let directory = environment["CREDENTIALS_DIRECTORY"], !directory.isEmpty else { return "is not set" }
        return "is not set (no credential file " + directory + "/" + name + ")"
    }

    private func read(_ path: String, for variable: String) throws(ConfigurationError) -> String {
        do {
            return try readFile(path)
        } catch {
            // Not the path: a secret pasted into the `_FILE` variable would be printed.
            throw ConfigurationError(.unreadable, variable, "names a file that cannot be read")
        }
    }
}
