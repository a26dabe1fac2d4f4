import Foundation

/// This repository's files, found from this source file's own path, never from the working directory.
enum Repository {
    /// The repository root: three levels above `Tests/DeploymentTests/Repository.swift`.
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent()

    static func url(_ path: String) -> URL { root.appendingPathComponent(path) }

    static func text(_ path: String) throws -> String {
        try String(contentsOf: url(path), encoding: .utf8)
    }

    /// Paths (relative to the root) of the files directly in `folder` whose names end with `suffix`, sorted.
    static func files(in folder: String, endingWith suffix: String) throws -> [String] {
        try FileManager.default.contentsOfDirectory(atPath: url(folder).path)
            .filter { $0.hasSuffix(suffix) }
            .sorted()
            .map { folder + "/" + $0 }
    }

    /// Every regular file under `folder`, recursively, as paths relative to the root.
    static func allFiles(under folder: String) -> [String] {
        guard let walker = FileManager.default.enumerator(atPath: url(folder).path) else { return [] }
        var paths: [String] = []
        while let next = walker.nextObject() as? String {
            var isDirectory: ObjCBool = false
            let path = folder + "/" + next
            if FileManager.default.fileExists(atPath: url(path).path, isDirectory: &isDirectory), !isDirectory.boolValue
            {
                paths.append(path)
            }
        }
        return paths.sorted()
    }
}
