/// The relay's version, from one place: the release number below (a release bumps it, and only it), plus the
/// commit when the binary was built from a git checkout (written at build time by RelayVersionPlugin).
public enum RelayVersion {
    /// The release this source tree is, or leads to.
    public static let release = "0.1.0"

    /// `release`, or `release+<commit>` (`+<commit>.dirty` with uncommitted changes) when built from git: what
    /// `duo-relay --version`, the start-up summary and `duo_relay_build_info` show.
    public static var text: String {
        guard let commit = BuildCommit.value, !commit.isEmpty else { return release }
        return release + "+" + commit
    }
}
