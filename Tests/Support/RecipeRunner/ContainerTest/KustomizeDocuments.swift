/// The documents of a `kubectl kustomize` rendering, found by kind and name, and what `podman kube play` is
/// given of them.
struct KustomizeDocuments {
    struct Document: Equatable {
        var kind: String
        /// `metadata.name`, with the hash kustomize appends to a generated ConfigMap's or Secret's name.
        var name: String
        var text: String
    }

    let documents: [Document]

    /// Splits a rendering at its `---` lines; each document's kind is its top-level `kind:`, its name the first
    /// `name:` indented by two (the metadata's).
    init(_ rendering: String) {
        var documents: [Document] = []
        var lines: [Substring] = []
        func flush() {
            guard !lines.isEmpty else { return }
            let kind = lines.first { $0.hasPrefix("kind: ") }.map { String($0.dropFirst("kind: ".count)) } ?? ""
            let name = lines.first { $0.hasPrefix("  name: ") }.map { String($0.dropFirst("  name: ".count)) } ?? ""
            documents.append(Document(kind: kind, name: name, text: lines.joined(separator: "\n") + "\n"))
            lines = []
        }
        for line in rendering.split(separator: "\n", omittingEmptySubsequences: false) {
            if line == "---" {
                flush()
            } else if !(line.isEmpty && lines.isEmpty) {
                lines.append(line)
            }
        }
        while lines.last?.isEmpty == true { lines.removeLast() }
        flush()
        self.documents = documents
    }

    /// The first document of `kind` named `name`, or (`generated`) named `name` with a hash appended.
    func document(_ kind: String, _ name: String, generated: Bool = false) -> Document? {
        documents.first { document in
            document.kind == kind
                && (document.name == name || (generated && document.name.hasPrefix(name + "-")))
        }
    }

    /// The documents' count of `kind`.
    func count(_ kind: String) -> Int { documents.filter { $0.kind == kind }.count }

    /// Documents joined for one `podman kube play`.
    static func joined(_ documents: [Document]) -> String {
        documents.map(\.text).joined(separator: "---\n")
    }

    /// The text of a ConfigMap's file `key`: the lines indented by four after its `key: |` line, up to the first
    /// that is not.
    static func configMapFile(_ document: Document, key: String) -> String? {
        let lines = document.text.split(separator: "\n", omittingEmptySubsequences: false)
        guard let start = lines.firstIndex(where: { $0 == "  \(key): |" }) else { return nil }
        return lines[(start + 1)...].prefix { $0.hasPrefix("    ") }.map { $0.dropFirst(4) + "\n" }.joined()
    }

    /// A Secret whose values are the files' contents as they are (`stringData` would be the API's way; podman
    /// 4.3's `podman secret create` of a kube Secret reads `data` and, for a secret volume, does not decode it).
    static func rawSecret(name: String, files: [(name: String, contents: String)]) -> String {
        var text = "apiVersion: v1\nkind: Secret\nmetadata:\n  name: \(name)\ndata:\n"
        for file in files {
            text += "  \(file.name): |-\n"
            var lines = file.contents.split(separator: "\n", omittingEmptySubsequences: false)
            if file.contents.hasSuffix("\n") { lines.removeLast() }
            text += lines.map { "    " + $0 }.joined(separator: "\n")
            // A file's own last newline stays, and one more ends the value.
            text += (file.contents.hasSuffix("\n") ? "\n" : "") + "\n"
        }
        return text
    }
}

/// The kustomization on top of the operator's that podman and this machine need (nothing else): the images
/// built here; APNs pointed at the simulator (relay.json and its CA in the ConfigMap); Services are not
/// implemented by podman, so the Redis Service's name becomes the Redis pod's address (in relay.json); podman
/// publishes every containerPort on the host: loopback and free ports; one replica (each would want the same
/// host ports). Written for kustomize 2.0 (Debian's kubectl 1.20) as well as later ones.
struct PodmanKustomization {
    /// `localhost/duo-deploy-redis:KEY`.
    var redisImage: String
    var relayPort: Int
    var relayMetricsPort: Int
    var redisPort: Int

    var kustomization: String {
        let tag = redisImage.split(separator: ":").last.map(String.init) ?? ""
        let name = redisImage.split(separator: ":").dropLast().joined(separator: ":")
        return """
            namespace: duo-relay
            bases: [../k8s/duo-relay-production]
            images:
              - { name: registry.example.org/duo-relay, newName: localhost/duo-relay, newTag: "1.0.0" }
              - { name: docker.io/library/redis, newName: \(name), newTag: "\(tag)" }
            configMapGenerator:
              - { name: duo-relay-config, behavior: replace, files: [relay.json, ca.pem] }
            patchesJson6902:
              - { target: { group: apps, version: v1, kind: Deployment, name: duo-relay }, path: relay.patch.yaml }
              - { target: { group: apps, version: v1, kind: Deployment, name: duo-relay-redis }, path: redis.patch.yaml }

            """
    }

    var relayPatch: String {
        """
        - { op: replace, path: /spec/replicas, value: 1 }
        - { op: add, path: /spec/template/spec/volumes/0/configMap/items/-, value: { key: ca.pem, path: ca.pem } }
        - { op: add, path: /spec/template/spec/containers/0/ports/0/hostIP, value: 127.0.0.1 }
        - { op: add, path: /spec/template/spec/containers/0/ports/0/hostPort, value: \(relayPort) }
        - { op: add, path: /spec/template/spec/containers/0/ports/1/hostIP, value: 127.0.0.1 }
        - { op: add, path: /spec/template/spec/containers/0/ports/1/hostPort, value: \(relayMetricsPort) }

        """
    }

    var redisPatch: String {
        """
        - { op: add, path: /spec/template/spec/containers/0/ports/0/hostIP, value: 127.0.0.1 }
        - { op: add, path: /spec/template/spec/containers/0/ports/0/hostPort, value: \(redisPort) }

        """
    }
}
