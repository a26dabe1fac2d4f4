import Foundation
import RelayTestSupport
import Testing

/// deploy/kubernetes validated against the Kubernetes API's JSON schemas by kubernetes-validate
/// (PyPI, pinned; `scripts/install-deps --test` puts it in .build/deploy-venv). It carries the
/// schemas of each Kubernetes release, so nothing is fetched; strict mode refuses unknown fields.
@Suite struct ManifestSchemaTests {
    static let validator = Repository.url(".build/deploy-venv/bin/kubernetes-validate").path
    /// The oldest and the newest releases the validator carries.
    static let versions = ["1.25.0", "1.37.0"]

    @Test(
        "every manifest validates strictly against the Kubernetes schemas",
        .enabled(if: Tool.isAvailable(validator)), arguments: versions)
    func manifestsValidate(version: String) throws {
        let files =
            try Manifests.files() + [
                "deploy/kubernetes/redis/redis.yaml", "deploy/kubernetes/redis/networkpolicy.yaml",
            ]
        #expect(files.count >= 5)
        let result = try Tool.run(
            Self.validator, ["--strict", "-k", version] + files.map { Repository.url($0).path })
        #expect(result.status == 0, "\(result.output) \(result.errors)")
        for file in files {
            let name = URL(fileURLWithPath: file).lastPathComponent
            #expect(result.output.contains("\(name) passed"), "\(name) was not validated: \(result.output)")
        }
    }

    @Test(
        "a misspelt field or a wrong type fails validation, so the check above can fail",
        .enabled(if: Tool.isAvailable(validator)))
    func validatorRejectsMistakes() throws {
        let scratch = try TemporaryDirectory()
        defer { scratch.remove() }
        let deployment = try Repository.text("deploy/kubernetes/deployment.yaml")
        for (original, mistake) in [
            ("readOnlyRootFilesystem: true", "readOnlyRootFileSystem: true"), ("replicas: 2", "replicas: two"),
        ] {
            #expect(deployment.contains(original))
            let file = try scratch.write(
                deployment.replacingOccurrences(of: original, with: mistake), to: "deployment.yaml")
            let result = try Tool.run(Self.validator, ["--strict", file.path])
            #expect(result.status != 0, "\(mistake) passed: \(result.output)")
        }
    }
}
