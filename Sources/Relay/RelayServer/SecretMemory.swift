import CSystem

/// Keeps the secrets in this process's memory (APNs signing keys, relay keys) to this process.
public enum SecretMemory {
    /// Makes the process undumpable (`PR_SET_DUMPABLE` 0), before any secret is read: no core file
    /// is written when it crashes, and other processes of the same user cannot attach with ptrace
    /// or read its `/proc/<pid>/mem`, `environ` (where secrets given as variables live) or `maps`.
    /// Only a process with CAP_SYS_PTRACE still can. `serve` and `check` call it: both hold the keys.
    /// - Returns: whether the process is now undumpable.
    @discardableResult
    public static func protect() -> Bool {
        csystem_forbid_dumping() == 0 && csystem_dumpable() == 0
    }
}
