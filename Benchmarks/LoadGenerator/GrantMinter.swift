import EventLoops
import Foundation
import RelayCore
import RelayCrypto

/// `mint`: asks the relay for one grant per fresh random device token (over a few keep-alive
/// connections), then writes one `POST /v1/push` body per grant, each with its own random `sealed`,
/// `id` and `thread`, as JSON lines.
struct GrantMinter: Sendable {
    var address: ResolvedAddress
    var host: String
    var count: Int
    var connections: Int
    var environment: String

    func run() throws(LoadError) -> [String] {
        guard count > 0 else { return [] }
        let grants = try LoadLoop.run("load-mint") { [self] loop, finish throws(LoadError) in
            try Run(self, loop: loop, finish: finish).start()
        }
        return grants.map(Self.pushBody(grant:))
    }

    /// One run, on its loop's thread: each connection asks for the next grant once it has its answer.
    private final class Run: LoadRun {
        let settings: GrantMinter
        let loop: EventLoop
        let finish: (Result<[String], LoadError>) -> Void
        var pool: [ClientConnection] = []
        /// Per connection, the grant its request in flight is for.
        var assigned: [Int] = []
        var grants: [String]
        var next = 0
        var done = 0
        var deadline: LoopTimer?
        var finished = false

        init(_ settings: GrantMinter, loop: EventLoop, finish: @escaping (Result<[String], LoadError>) -> Void) {
            self.settings = settings
            self.loop = loop
            self.finish = finish
            grants = [String](repeating: "", count: settings.count)
        }

        func start() throws(LoadError) {
            for index in 0..<max(1, min(settings.connections, settings.count)) {
                pool.append(try ClientConnection.open(index, to: settings.address, on: loop, owner: self))
                assigned.append(-1)
            }
            let deadline = LoopTimer(on: loop) { [self] in
                end(.failure(LoadError(.failed, "minting grants took too long")))
            }
            deadline.schedule(afterMilliseconds: 120_000)
            self.deadline = deadline
        }

        func ask(_ client: ClientConnection) {
            guard next < settings.count else { return }
            let token = Hex.encode(SecureRandom.bytes(count: 32))
            let body = Array(#"{"token":"\#(token)","environment":"\#(settings.environment)"}"#.utf8)
            assigned[client.index] = next
            next += 1
            client.send(HTTPRequestBytes.post(path: "/v1/grant", host: settings.host, body: body))
        }

        func closeTimers() { deadline?.close() }

        func clientDidConnect(_ client: ClientConnection) {
            guard !finished else { return }
            ask(client)
        }

        func client(
            _ client: ClientConnection, didReceive status: Int, body: UnsafeRawBufferPointer, at instant: UInt64
        ) {
            guard !finished else { return }
            guard status == 200, let grant = GrantMinter.grant(in: Array(body)[...]) else {
                end(.failure(LoadError(.failed, "POST /v1/grant answered \(status)")))
                return
            }
            grants[assigned[client.index]] = grant
            done += 1
            if done == settings.count {
                end(.success(grants))
            } else {
                ask(client)
            }
        }

        func clientDidEnd(_ client: ClientConnection) {
            end(.failure(LoadError(.failed, "the relay closed a connection while minting")))
        }
    }

    /// The `grant` value of `{"grant":"...","expires_at":"..."}`.
    static func grant(in body: ArraySlice<UInt8>) -> String? {
        let key = Array(#""grant":""#.utf8)
        let bytes = Array(body)
        guard bytes.count > key.count else { return nil }
        for start in 0...(bytes.count - key.count) where Array(bytes[start..<start + key.count]) == key {
            let valueStart = start + key.count
            guard let end = bytes[valueStart...].firstIndex(of: UInt8(ascii: "\"")) else { return nil }
            return String(decoding: bytes[valueStart..<end], as: UTF8.self)
        }
        return nil
    }

    /// A valid push body for `grant`: fresh random sealed bytes, id and thread.
    static func pushBody(grant: String) -> String {
        let sealed = Base64.encode(SecureRandom.bytes(count: PushRequest.sealedByteCount))
        let id = Hex.encode(SecureRandom.bytes(count: 32))
        let thread = Hex.encode(SecureRandom.bytes(count: 32))
        return #"{"grant":"\#(grant)","sealed":"\#(sealed)","id":"\#(id)","thread":"\#(thread)"}"#
    }
}
