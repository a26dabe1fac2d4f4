import Foundation
import PackagePlugin

/// Writes `BuildCommit.swift` into RelayVersion before every build: the checkout's commit (`git rev-parse
/// --short=12 HEAD`, `.dirty` with uncommitted changes) or nil where there is no git (a source tarball, a
/// container build that copies only the sources). The file is rewritten only when its text changes, so an
/// unchanged commit rebuilds nothing.
@main struct RelayVersionPlugin: BuildToolPlugin {
    func createBuildCommands(context: PluginContext, target: Target) throws -> [Command] {
        let output = context.pluginWorkDirectoryURL.appending(path: "generated")
        let script = """
            set -u
            repo="$1"; out="$2/BuildCommit.swift"; mkdir -p "$2"
            commit=""
            if command -v git >/dev/null 2>&1; then
                commit=$(git -c safe.directory='*' -C "$repo" rev-parse --short=12 HEAD 2>/dev/null) || commit=""
                if [ -n "$commit" ] && ! git -c safe.directory='*' -C "$repo" diff --quiet HEAD -- 2>/dev/null; then
                    commit="$commit.dirty"
                fi
            fi
            case "$commit" in *[!0-9a-f.dirty]*) commit="" ;; esac
            if [ -n "$commit" ]; then value="\\"$commit\\""; else value="nil"; fi
            text="// Generated at build time by RelayVersionPlugin; not checked in.
            enum BuildCommit { static let value: String? = $value }"
            if [ ! -f "$out" ] || [ "$(cat "$out")" != "$text" ]; then printf '%s\\n' "$text" > "$out"; fi
            """
        return [
            .prebuildCommand(
                displayName: "RelayVersion: the build's git commit",
                executable: URL(fileURLWithPath: "/bin/sh"),
                arguments: ["-c", script, "sh", context.package.directoryURL.path, output.path],
                environment: ["PATH": "/usr/local/bin:/usr/bin:/bin"],
                outputFilesDirectory: output)
        ]
    }
}
