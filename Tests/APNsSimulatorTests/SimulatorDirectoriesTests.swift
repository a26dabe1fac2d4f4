import APNsSimulator
import Foundation
import RelayCrypto
import Testing

/// `apns-sim --keys DIR` and `--ca-dir DIR`: keys by the key id in Apple's file names; a CA made once and kept.
@Suite struct SimulatorDirectoriesTests {
    func temporaryDirectory() throws -> String {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("apns-sim-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        return path
    }

    @Test(
        arguments: [
            ("AuthKey_ABCDE12345.p8", "ABCDE12345"), ("AuthKey_k1.p8", "k1"), ("AuthKey_.p8", nil),
            ("ABCDE12345.p8", nil),
            ("AuthKey_ABC-DE.p8", nil), ("AuthKey_ABCDE12345.pem", nil), ("AuthKey_ÄBC.p8", nil),
        ] as [(String, String?)])
    func theKeyIDIsInTheFileName(_ name: String, _ id: String?) {
        #expect(SimulatorKeyDirectory.keyID(fileName: name) == id)
    }

    @Test func everyKeyOfADirectoryByItsKeyID() throws {
        let directory = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let old = P256.Signing.PrivateKey()
        let new = P256.Signing.PrivateKey()
        try old.pemRepresentation.write(toFile: directory + "/AuthKey_OLDKEY0001.p8", atomically: true, encoding: .utf8)
        try new.pemRepresentation.write(toFile: directory + "/AuthKey_NEWKEY0002.p8", atomically: true, encoding: .utf8)
        try "not a key".write(toFile: directory + "/README.txt", atomically: true, encoding: .utf8)
        let keys = try SimulatorKeyDirectory.keys(in: directory)
        #expect(keys.keys.sorted() == ["NEWKEY0002", "OLDKEY0001"])
        #expect(keys["OLDKEY0001"]?.pemRepresentation == old.publicKey.pemRepresentation)
        #expect(keys["NEWKEY0002"]?.pemRepresentation == new.publicKey.pemRepresentation)

        try "garbage".write(toFile: directory + "/AuthKey_BROKEN0003.p8", atomically: true, encoding: .utf8)
        #expect(throws: SimulatorKeyDirectory.Problem.self) { try SimulatorKeyDirectory.keys(in: directory) }
        try FileManager.default.removeItem(atPath: directory + "/AuthKey_BROKEN0003.p8")
        try old.pemRepresentation.write(toFile: directory + "/key.p8", atomically: true, encoding: .utf8)
        do {
            _ = try SimulatorKeyDirectory.keys(in: directory)
            Issue.record("a .p8 named otherwise was taken")
        } catch {
            #expect(error.description.contains("key.p8 is not named AuthKey_<KEY ID>.p8"))
        }
        let empty = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: empty) }
        #expect(throws: SimulatorKeyDirectory.Problem.self) { try SimulatorKeyDirectory.keys(in: empty) }
    }

    @Test func aCADirectoryIsMadeOnceAndReadBack() throws {
        let directory = try temporaryDirectory() + "/ca"
        defer { try? FileManager.default.removeItem(atPath: (directory as NSString).deletingLastPathComponent) }
        let first = try SimulatorCADirectory.load(directory)
        #expect(first.made && first.caPath == directory + "/ca.pem")
        let mode = try FileManager.default.attributesOfItem(atPath: directory + "/server-key.pem")[.posixPermissions]
        #expect((mode as? NSNumber)?.intValue == 0o600)
        let second = try SimulatorCADirectory.load(directory)
        #expect(!second.made)
        #expect(second.caCertificatePEM == first.caCertificatePEM)
        #expect(second.certificatePEM == first.certificatePEM && second.privateKeyPEM == first.privateKeyPEM)
        try FileManager.default.removeItem(atPath: directory + "/server.pem")
        do {
            _ = try SimulatorCADirectory.load(directory)
            Issue.record("a directory missing a file was taken")
        } catch {
            #expect(error.description.contains("but not all of ca.pem, server.pem and server-key.pem"))
        }
    }
}
