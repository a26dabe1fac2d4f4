import Foundation
import RelayTestSupport

/// Kubernetes manifests parsed by Debian's python3-yaml (a real YAML parser, not a guess) and handed
/// over as JSON.
enum Manifests {
    /// Debian's interpreter, where python3-yaml is installed (another python3 on PATH may lack it).
    static let python = "/usr/bin/python3"

    private static let script = """
        import json, sys, yaml
        documents = []
        for path in sys.argv[1:]:
            with open(path) as stream:
                for document in yaml.safe_load_all(stream):
                    if document is not None:
                        documents.append({"file": path, "document": document})
        json.dump(documents, sys.stdout, default=str)
        """

    /// The relay's manifests: every `.yaml` file directly in `deploy/kubernetes` but the kustomization.
    static func files() throws -> [String] {
        try Repository.files(in: "deploy/kubernetes", endingWith: ".yaml").filter {
            !$0.hasSuffix("/kustomization.yaml")
        }
    }

    /// Every document of the relay's manifests (`files()`), with the file it came from.
    static func load() throws -> [(file: String, document: JSONNode)] {
        try load(try files())
    }

    /// Every document of `files` (paths relative to the repository, or absolute), with the file it came from.
    static func load(_ files: [String]) throws -> [(file: String, document: JSONNode)] {
        let result = try Tool.run(
            python, ["-c", script] + files.map { $0.hasPrefix("/") ? $0 : Repository.url($0).path })
        guard result.status == 0 else {
            throw DocumentationError(reason: "python3-yaml could not parse the manifests: " + result.errors)
        }
        return try JSONNode(parsing: result.output).array.map { entry in
            (file: URL(fileURLWithPath: entry["file"].string ?? "").lastPathComponent, document: entry["document"])
        }
    }

    /// The one document of `kind`.
    static func only(_ kind: String, in manifests: [(file: String, document: JSONNode)]) throws -> JSONNode {
        let matching = manifests.filter { $0.document["kind"].string == kind }
        guard matching.count == 1 else {
            throw DocumentationError(reason: "expected one \(kind), found \(matching.count)")
        }
        return matching[0].document
    }
}
