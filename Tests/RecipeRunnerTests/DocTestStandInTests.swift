import Foundation
import Glibc
import Testing

@testable import RecipeRunner

/// What the doc test's stand-ins for the socket unit and certbot read, on real text, and the socket holder itself.
@Suite struct DocTestStandInTests {
    @Test func aFingerprintIsReadFromOpensslsLineAndFromTheRelays() {
        let hex = "4F0B" + String(repeating: "A1", count: 30)
        let colons = stride(from: 0, to: 64, by: 2).map { index in
            String(hex[hex.index(hex.startIndex, offsetBy: index)..<hex.index(hex.startIndex, offsetBy: index + 2)])
        }.joined(separator: ":")
        #expect(DocTestReadings.fingerprint("sha256 Fingerprint=\(colons)\n") == hex)
        #expect(DocTestReadings.fingerprint("SHA256 Fingerprint=\(colons.lowercased())") == hex)
        let relay =
            "2026-12-05T14:35:00.123Z info duo-relay: reloaded: relay keys 1; tls: certificate subject "
            + "CN=relay.example.org, expires 2027-03-04T12:00:00Z, SHA-256 \(colons)"
        #expect(DocTestReadings.fingerprint("an earlier line\n" + relay + "\n") == hex)
        // The last line that names one; a shortened one is none.
        #expect(DocTestReadings.fingerprint("SHA-256 \(colons)\nSHA-256 4F:0B:…:9A") == hex)
        #expect(DocTestReadings.fingerprint("SHA-256 4F:0B:…:9A") == nil)
    }

    @Test func theHolderLineAndTheListenStreamAddressRead() {
        #expect(SocketUnitStandIn.holderLine("1234 5\n")! == (1234, 5))
        #expect(SocketUnitStandIn.holderLine("1234") == nil)
        #expect(SocketUnitStandIn.hostPort("127.0.0.1:8787")! == ("127.0.0.1", 8787))
        #expect(SocketUnitStandIn.hostPort("8787") == nil)
    }

    @Test func aRenewalFileKeepsTheNamesAndTheHook() {
        let settings = CertbotStandIn.settings(
            "domains = relay.example.org,www.example.org\ndeploy_hook = /etc/duo-relay/certbot-deploy-hook\n")
        #expect(settings["domains"] == "relay.example.org,www.example.org")
        #expect(settings["deploy_hook"] == "/etc/duo-relay/certbot-deploy-hook")
    }

    /// The holder listens with the unit's backlog and records its PID and descriptor; a copy of that descriptor,
    /// taken as the service's stand-in takes it, accepts connections made to the address while the holder holds it.
    @Test func theHeldSocketIsCopiedIntoAnotherProcessAndAccepts() throws {
        let directory = NSTemporaryDirectory() + "duo-relay-holder-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        // A free port: bound, read, closed (the holder binds it with SO_REUSEADDR).
        let probe = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = UInt32(0x7f00_0001).bigEndian
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { pointer in
                bind(probe, pointer, length) == 0 && getsockname(probe, pointer, &length) == 0
            }
        }
        let port = UInt16(bigEndian: address.sin_port)
        close(probe)
        // duo-relay-recipes of the same build, beside the test bundle.
        let tests = try FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")
        let recipes = URL(fileURLWithPath: tests).deletingLastPathComponent().appendingPathComponent(
            "duo-relay-recipes")
        #expect(access(recipes.path, X_OK) == 0, "build duo-relay-recipes first (swift build --build-tests builds it)")
        let holder = try RecipeProcess(
            recipes.path, ["socket-holder", "127.0.0.1:\(port)", "16", directory + "/socket"],
            output: .discard, error: .discard)
        defer { holder.stop() }
        let standIn = SocketUnitStandIn(unit: directory + "/none.socket", state: directory)
        #expect(RecipeClock.within(10) { standIn.holder != nil })
        let copy = try #require(standIn.copyOfSocket())
        defer { close(copy) }
        #expect(copy != 3)
        let client = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(client) }
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(client, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        #expect(connected == 0)
        let accepted = accept(copy, nil, nil)
        #expect(accepted >= 0)
        if accepted >= 0 { close(accepted) }
        #expect(standIn.stop() == 0)
        #expect(standIn.holder == nil)
    }
}
